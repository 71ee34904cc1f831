"""The nT2VR collections (no heavy imports: the task registry reads this at start-up)."""

COLLECTIONS = {  # task prefix -> (collection folder, media kind, what it is)
    "msrvtt3k": ("msrvtt10ktest", "video", "MSR-VTT official test split, 2,990 videos"),
    "msrvtt1k": ("msrvtt1kAtest", "video", "MSR-VTT 1k-A test split (JSFusion), 1,000 videos"),
    "vatex": ("vatex_test1k5", "video", "VATEX test split of HGR, 1,500 videos"),
    "flickr30k": ("flickr30ktest", "image", "Flickr30k test split, 1,000 images"),
    "mscoco": ("mscoco5ktest", "image", "MS-COCO 5k test split"),
}
QUERY_SETS = ("original", "negated", "composed")
