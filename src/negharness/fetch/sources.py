"""The sources table: where each file a task reads comes from, pinned, with what is known of it.

Declarative data only. A GitHub file is pinned to a commit and its SHA-256 taken from a mirror of
that commit (``git show COMMIT:path | sha256sum``); an archive from its official host carries the
checksum its publisher or well-kept downloaders publish (MD5 where that is all there is) and its
SHA-256 is recorded in the data root's manifest at first download; a Drive- or hub-hosted file with
no published checksum is hashed at first download and held to that hash afterwards (`manifest`);
a hub file on a moving revision (``main``, ``refs/convert/parquet``) has the commit it came from
recorded there too, and later fetches ask for that commit (`hub`).
``origin`` says what was checked, and when, so a reader can redo it. Sizes are bytes, exact (a
mirror's blob, a published checksum list, a download script that checks the byte count) unless
``origin`` marks them ``~`` (NeIn's hub snapshot); None where nothing published says.

A ``--sources FILE`` (JSON: a list of objects with these field names) replaces the table: a lab's
mirror, a private benchmark, the tests' loopback server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError


@dataclass(frozen=True)
class Unpack:
    """Which members of an archive land where: ``strip`` is removed from each member name, then only
    names under ``only`` are kept, written under ``into`` (a folder under the data root)."""

    into: str
    only: str = ""
    strip: str = ""


@dataclass(frozen=True)
class Source:
    """One downloadable (or manually placed) file. ``name`` is unique and, for a plain file, its path
    under the data root; ``tasks`` are task names or globs that read it."""

    name: str
    url: str = ""
    sha256: str | None = None
    size: int | None = None
    tasks: tuple[str, ...] = ()
    md5: str | None = None  # a published MD5 (COCO, VOC): checked as well where no SHA-256 is published
    sha1: str | None = None  # a published SHA-1 (Visual Genome, as GluonCV pins it)
    git_blob: str | None = None  # a GitHub blob id: the file's git hash, checked where the mirror lacks the bytes
    unpack: Unpack | None = None
    done: str = ""  # a path under the data root that is there once an archive or manual source is in place
    manual: str = ""  # the steps, for a source no program may fetch (licence, sign-up, Drive folder)
    patterns: tuple[str, ...] = ()  # hub snapshot: the files of the repository to take (globs)
    flat: bool = False  # snapshot: each file straight under ``name/`` (else at its path in the repository)
    gated: bool = False  # hub: the terms must be accepted on the Hub, and a token given, before it downloads
    origin: str = ""
    licence: str = ""

    @property
    def kind(self) -> str:
        """file | archive | snapshot | manual."""
        if self.manual:
            return "manual"
        if self.patterns:
            return "snapshot"
        return "archive" if self.unpack else "file"

    @property
    def lands(self) -> str:
        """Where the files tasks read end up under the data root: the file, the snapshot's folder, the
        folder an archive's kept members are written to, the manual target."""
        if self.kind == "archive" and self.unpack:
            return f"{self.unpack.into}/{self.unpack.only}".rstrip("/")
        if self.kind == "manual":
            return self.done or self.name
        return self.name

    @property
    def target(self) -> str:
        """Where the downloaded bytes go under the data root: the file itself, or an archive kept in
        ``.downloads/`` until it is unpacked."""
        if self.kind == "archive":
            return f".downloads/{self.url.rsplit('/', 1)[-1].split('?')[0] or self.name.replace('/', '_')}"
        return self.name


def _gh(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _drive(file_id: str) -> str:
    """A public Google Drive file (not a folder): the direct route, past the virus-scan page."""
    return f"https://drive.usercontent.google.com/download?id={file_id}&export=download&confirm=t"


SUGARCREPE = ("RAIVNLab/sugar-crepe", "0047054b243992f0fad63d6f64f7544862daf846")
_SUGARCREPE_FILES = {  # file: (sha256, bytes), from the mirror at SUGARCREPE's commit
    "add_att": ("012d88d729693d193760e6f3393b06a1cf874380a9db0062e937201199fe044d", 158863),
    "add_obj": ("1b9d76b93139a937b8dc1ada92a4f05ecc821bb3c291d752428bafadd4bb0682", 484593),
    "replace_att": ("9fe55fd4c0a9ad1f85d486d9f6d0215b41f867eb025026e7f7b5ce44352545ee", 176843),
    "replace_obj": ("9d299600639947e9d15281a9ded1382b376cf4ea088a8d08a1314bfe76e81898", 361126),
    "replace_rel": ("356bcc2fc4c6aed3f4d9fd50acc58489bb1fe70c28791f9368d4cbf9ea39cdc9", 312629),
    "swap_att": ("7a7ce04e5c4c80412b48c6f0c1347fb1a2f5d54c0be6aa429b64d390e442f8d0", 154665),
    "swap_obj": ("073cdb8e253d053614e80710834d9773b09dbc1dd0a412f6f9492262caa1dcad", 57569),
}

# NegBench's evaluation CSVs: the authors publish them only in a Drive folder (datasets.md); this
# public re-host holds byte-identical copies (consistency checked against the authors' published
# per-template accuracies, see the shared data's SOURCE.md).
NEGBENCH = ("sepehrkr/SpaceVLM", "d37fec28cb86c1f2855cc849a05cc11aa88c020e")
_NEGBENCH_FILES = {  # data/<path>: (sha256, bytes, tasks)
    "images/COCO_val_mcq_llama3.1_rephrased.csv": (
        "42bc853b64fb7d995e73e39212cbbe076ea3e06c8dca1ccc892910f3f91bceee", 1321191, ("negbench_mcq_coco",)),
    "images/VOC2007_mcq_llama3.1_rephrased.csv": (
        "666269c3661d29c9148c702fdae7efa049b7f9b312679f845ac66ddf619979c1", 1156070, ("negbench_mcq_voc2007",)),
    "images/VOC2007_mcq.csv": (
        "0663c5262dd75cb337cce142781d8f5c9315fa36eda35f81277c4f0e953b236a", 1217699,
        ("negbench_mcq_voc2007_templated",)),
    "images/synthetic_mcq_llama3.1_rephrased.csv": (
        "84c3f07c6bdf96238838f4278a3d5a3f00b31f9d35549e31f83d771de8b29374", 3247006, ("negbench_mcq_hardneg_syn",)),
    "images/COCO_val_retrieval.csv": (
        "dfe9217359b42f3f68bd93245f92a04701b8d3cde0aaf3fd1c26694d6de8d547", 1994138, ("negbench_retrieval_coco*",)),
    "images/COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv": (
        "08a8db9b96130ab27f91f5ef14f413981d70a96bc9b3557436a26256db115b7d", 2912742, ("negbench_retrieval_coco",)),
    "images/COCO_val_negated_retrieval_template.csv": (
        "25444374270f3cb1fc499f79da562a239bc0b077ab6a489a93addce973a42aa2", 3015139,
        ("negbench_retrieval_coco_templated",)),
    "images/synthetic_retrieval_v1.csv": (
        "1f6601d433c04586a31b44be63bdac1b28ffcad96d305da42a11267391e6d067", 624881, ("negbench_retrieval_hardneg_syn",)),
    "images/synthetic_retrieval_v2.csv": (
        "3f49724cdc49ce85710c820f1116ef0535be83a40551c697a751cfb48b56c760", 1305061, ("negbench_retrieval_hardneg_syn",)),
    "videos/msr_vtt_retrieval.csv": (
        "5a3f5dd07a6e8623a1bc7966aeb4f1ec8d0e3300a0ab1c1ec424079e0d79d896", 1155412, ("negbench_retrieval_msrvtt",)),
    "videos/msr_vtt_retrieval_rephrased_llama.csv": (
        "c1e4dae44f21e7ff432550f6c7331ad8c4da78e8aea5a5519740be5d5e79c888", 1218773, ("negbench_retrieval_msrvtt",)),
    "videos/msr_vtt_mcq_rephrased_llama.csv": (
        "026bb5df20ca4761796babe2b5bdf36d235e4eca7c82704fbb63055d6a495ae4", 193222, ("negbench_mcq_msrvtt",)),
    "videos/msr_vtt_mcq_templated.csv": (
        "e37fcae4e00ec5dac6aa7a32c2ef7dd34eb81783e8f55bc846d1124d80b39483", 306640, ("negbench_mcq_msrvtt_templated",)),
}

# SugarCrepe++ (Dumpala et al.): data/*.json of the authors' repository (not generated_data/: the
# item counts of data/ are the ones the task YAMLs state: 788, 1652, 1406, 666, 245).
SUGARCREPEPP = ("Sri-Harsha/scpp", "c083bbf039a5ca215acaf25e7ee736d2ea6f3864")
_SUGARCREPEPP_FILES = {  # file: (sha256, bytes), from the mirror at SUGARCREPEPP's commit (data/ added in cfdcd82)
    "replace_att": ("6826413592894754eeca02aeebbcbbc8b95a7456998abcc714e71c033ce6fe87", 226275),
    "replace_obj": ("5c6dc499ec8f511a8aa4ec1b7b5eb0eca90317488abe36ec39573355e2d361ab", 456601),
    "replace_rel": ("040fb95d3f0619bf515db60879e99709a87a5e9b4f524ec3403b127243480fd4", 392738),
    "swap_att": ("450d0fd9fcad3e6f44950dc634e7f901ab1c6d9c60a569ade5ae8ffb3d203ad8", 198206),
    "swap_obj": ("5f33cae824de431a7ecd3c5de6301f689815f9497aa36d96b154bbaf117b201b", 74611),
}
NEGATIONCLIP = ("parkquasar/NegationCLIP", "6f858ee490d5c17d54cbc1862dfd44f74f36324d")
NEGATION_STEERING = ("fawazsammani/negation-steering", "10011d97092a08324b17d333b2b344d6d0310356")
VISMIN = "2f379d5b9a3af7f10d3266f6389b7b351e54c493"  # mair-lab/vismin-bench, as the vismin_* YAMLs pin it
NATURALBENCH = "b6a84a18ba24544169681d4b15543dd103d4d3bb"  # BaiqiL/NaturalBench: the commit that uploaded the zip
UNPINNED = ("revision not pinned ({why}): the first download records the commit it got in the manifest, later "
            "fetches ask for that commit and refuse another; each file's SHA-256 is recorded at first download")
PARQUET = "the Hub's parquet conversion, a branch the Hub rewrites; the task YAML reads it"

VALSE = ("Heidelberg-NLP/VALSE", "2152d90d4aecd11f7f74cf03420abcb63efff9c5")
CREPE = ("RAIVNLab/CREPE", "1fa81c425f442396fe304f170c8eb6dc0747c814")
TFDS = "tensorflow/datasets@333639b tensorflow_datasets/url_checksums/coco.txt"  # url, bytes, sha256 per archive
ARO = "mertyg/vision-language-models-are-bows@81fdd20 dataset_zoo/aro_datasets.py"
COCO_VAL2017_TASKS = ("sugarcrepe_*", "sugarcrepepp_*_itt", "negbench_mcq_coco", "negbench_retrieval_coco*", "nein_*")
MSRVTT_TASKS = ("negbench_mcq_msrvtt*", "negbench_retrieval_msrvtt")
NT2VR_TASKS = ("msrvtt3k_*", "msrvtt1k_*", "vatex_*", "mscoco_*", "flickr30k_*", "msrvtt10ktrain")
_NT2VR = {  # collection folder: (tasks, media folder, where the media come from), as the nT2VR tasks read them
    "msrvtt10ktest": (("msrvtt3k_*",), "videos", "MSR-VTT (the MSR-VTT site or Frozen-in-Time's MSRVTT.zip)"),
    "msrvtt1kAtest": (("msrvtt1k_*",), "videos", "MSR-VTT (the MSR-VTT site or Frozen-in-Time's MSRVTT.zip)"),
    "vatex_test1k5": (("vatex_*",), "videos", "VATEX (the VATEX site, HGR split)"),
    "flickr30ktest": (("flickr30k_*",), "images", "Flickr30k (the licence form at forms.illinois.edu/sec/229675)"),
    "mscoco5ktest": (("mscoco_*",), "images", "MS-COCO (cocodataset.org, val2014)"),
    "msrvtt10ktrain": (("msrvtt10ktrain",), "videos", "MSR-VTT (the MSR-VTT site or Frozen-in-Time's MSRVTT.zip)"),
}
_CHEXPERT_CSVS = {"chexpert_mcq.csv": "negbench_mcq_chexpert", "chexpert_mcq_no_negation.csv": "negbench_mcq_chexpert_control",
                  "chexpert_binary_mcq.csv": "negbench_mcq_chexpert_binary",
                  "chexpert_binary_mcq_control.csv": "negbench_mcq_chexpert_binary_control"}

SOURCES: tuple[Source, ...] = (
    *(Source(f"sugarcrepe/{n}.json", _gh(*SUGARCREPE, f"data/{n}.json"), sha, size, (f"sugarcrepe_{n}", "sugarcrepe_mean"),
             origin=f"github {SUGARCREPE[0]}@{SUGARCREPE[1][:7]} data/{n}.json (sha256 from the mirror)",
             licence="MIT")
      for n, (sha, size) in _SUGARCREPE_FILES.items()),
    *(Source(f"negbench/{p}", _gh(*NEGBENCH, f"data/{p}"), sha, size, tasks,
             origin=f"github {NEGBENCH[0]}@{NEGBENCH[1][:7]} data/{p} (sha256 from the mirror; byte-identical "
                    "to the authors' Drive files by their published per-template counts)",
             licence="MIT (m1k2zoo/negbench); captions from COCO (CC BY 4.0), VOC2007, MSR-VTT")
      for p, (sha, size, tasks) in _NEGBENCH_FILES.items()),
    Source("valse/existence.json", _gh(*VALSE, "data/existence.json"),
           "b20fca52eba86c544083d423345a2e28e60e601ef61c56c9ac1c73a95a3a6d18", 420403, ("valse_existence",),
           origin=f"github {VALSE[0]}@{VALSE[1][:7]} data/existence.json (sha256 from the mirror)", licence="MIT"),
    Source("crepe/prod_hard_negatives.zip", _gh(*CREPE, "data/prod_hard_negatives.zip"), None, None, ("crepe_negate",),
           git_blob="e73068643923319ab8bd38a43404a34221d41b41",
           unpack=Unpack("crepe", only="prod_hard_negatives/negate/"),
           done="crepe/prod_hard_negatives/negate/prod_vg_hard_negs_negate_complexity_4.csv",
           origin=f"github {CREPE[0]}@{CREPE[1][:7]} data/prod_hard_negatives.zip (git blob id from the mirror; "
                  "the mirror lacks the bytes, so the SHA-256 is recorded at first download)",
           licence="no licence file"),
    Source("aro/visual_genome_relation.json", _drive("1kX2iCHEv0CADL8dSO1nMdW-V0NqIAiP3"), None, None,
           ("aro_vg_relation",), origin=f"Google Drive id from {ARO}", licence="MIT"),
    Source("aro/visual_genome_attribution.json", _drive("13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw"), None, None,
           ("aro_vg_attribution",), origin=f"Google Drive id from {ARO}", licence="MIT"),
    Source("aro/vgr_vga_images.zip", _drive("1qaPlrwhGNMrR3a11iopZUT_GPP_LrgP9"), None, None, ("aro_vg_*",),
           unpack=Unpack("aro", only="images/"), done="aro/images",
           origin=f"Google Drive id from {ARO}", licence="Visual Genome CC BY 4.0"),
    Source("aro/coco_karpathy_test.json",
           "https://storage.googleapis.com/sfr-vision-language-research/datasets/coco_karpathy_test.json", None, None,
           ("aro_coco_order",), origin=f"URL from {ARO} (BLIP's split files)", licence="BSD-3 (BLIP)"),
    Source("aro/flickr30k_test.json",
           "https://storage.googleapis.com/sfr-vision-language-research/datasets/flickr30k_test.json", None, None,
           ("aro_flickr_order",), origin=f"URL from {ARO} (BLIP's split files)", licence="BSD-3 (BLIP)"),
    Source("coco/val2017.zip", "http://images.cocodataset.org/zips/val2017.zip",
           "4f7e2ccb2866ec5041993c9cf2a952bbed69647b115d0f74da7ce8f4bef82f05", 815585330, COCO_VAL2017_TASKS,
           md5="442b8da7639aecaf257c1dceb8ba8c80", unpack=Unpack("coco", only="val2017/"), done="coco/val2017",
           origin=f"images.cocodataset.org (URL from cocodataset.org/#download); SHA-256 and size as {TFDS} pins "
                  "them; MD5 as published in detectron / NVIDIA's download scripts",
           licence="COCO: CC BY 4.0 annotations, Flickr terms"),
    Source("coco/val2014.zip", "http://images.cocodataset.org/zips/val2014.zip",
           "fe9be816052049c34717e077d9e34aa60814a55679f804cd043e3cbee3b9fde0", 6645013297, ("aro_coco_order", "simpleneg"),
           md5="a3d79f5ed8d289b7a7554ce06a5782b3", unpack=Unpack("coco", only="val2014/"), done="coco/val2014",
           origin=f"images.cocodataset.org; SHA-256 and size as {TFDS} pins them; MD5 as PaddlePaddle's COCO "
                  "download pins it", licence="COCO: CC BY 4.0 annotations, Flickr terms"),
    Source("coco/train2014.zip", "http://images.cocodataset.org/zips/train2014.zip",
           "ede4087e640bddba550e090eae701092534b554b42b05ac33f0300b984b31775", 13510573713, ("negrefcocog",),
           md5="0da8c0bd3d6becc4dcb32757491aca88", unpack=Unpack("coco", only="train2014/"), done="coco/train2014",
           origin=f"images.cocodataset.org; SHA-256 and size as {TFDS} pins them; MD5 as PaddlePaddle's COCO "
                  "download pins it", licence="COCO: CC BY 4.0 annotations, Flickr terms"),
    Source("voc2007/VOCtest_06-Nov-2007.tar", "http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtest_06-Nov-2007.tar",
           "6836888e2e01dca84577a849d339fa4f73e1e4f135d312430c4856b5609b4892", 451020800, ("negbench_mcq_voc2007*",),
           md5="b6e924de25625d8de591ea690078ad9f",
           unpack=Unpack("voc2007", only="JPEGImages/", strip="VOCdevkit/VOC2007/"), done="voc2007/JPEGImages",
           origin="URL from m1k2zoo/negbench datasets.md; SHA-256 as pytorch/vision's prototype VOC dataset pins it "
                  "for this URL (tensorflow/datasets url_checksums/voc.txt: the same SHA-256 and size for the "
                  "pjreddie.com mirror); MD5 as torchvision's VOCDetection pins it",
           licence="PASCAL VOC: research use, Flickr terms"),
    Source("visual_genome/images.zip", "https://cs.stanford.edu/people/rak248/VG_100K_2/images.zip", None, 9731705982,
           ("crepe_negate",), sha1="a055367f675dd5476220e9b93e4ca9957b024b94",
           unpack=Unpack("visual_genome", only="VG_100K/"), done="visual_genome/VG_100K",
           origin="Visual Genome v1.2 download page; SHA-1 as GluonCV's visualgenome.py pins it; size as "
                  "independent download scripts check it byte for byte", licence="CC BY 4.0"),
    Source("visual_genome/images2.zip", "https://cs.stanford.edu/people/rak248/VG_100K_2/images2.zip", None, 5471658058,
           ("crepe_negate",), sha1="2add3aab77623549e92b7f15cda0308f50b64ecf",
           unpack=Unpack("visual_genome", only="VG_100K_2/"), done="visual_genome/VG_100K_2",
           origin="Visual Genome v1.2 download page; SHA-1 as GluonCV's visualgenome.py pins it; size as "
                  "independent download scripts check it byte for byte", licence="CC BY 4.0"),
    Source("visual7w/visual7w_images.zip", "http://vision.stanford.edu/yukezhu/visual7w_images.zip", None, None,
           ("valse_existence",), unpack=Unpack("visual7w", only="images/"), done="visual7w/images",
           origin="Visual7W README (github.com/yukezhu/visual7w-toolkit); no published checksum",
           licence="Visual7W: CC BY 4.0 (COCO images)"),
    Source("negvqa/NegVQA-7379.jsonl", "hf://datasets/yuhuizhang/NegVQA@main/NegVQA-7379.jsonl", None, None,
           ("negvqa_*",), origin="Hugging Face dataset yuhuizhang/NegVQA; the revision and SHA-256 are pinned in "
                                 "the manifest at first download", licence="see the dataset card"),
    Source("nein", "hf://datasets/nhatttanbui/NeIn@main", None, 4_900_000_000, ("nein_*",),
           patterns=("*validation*.parquet",), flat=True,
           origin="Hugging Face dataset nhatttanbui/NeIn (validation split, ~4.9 GB: no file list published, so "
                  "approximate); the revision and each file's "
                  "SHA-256 are pinned in the manifest at first download", licence="CC BY 4.0"),
    *(Source(f"sugarcrepepp/{n}.json", _gh(*SUGARCREPEPP, f"data/{n}.json"), sha, size, (f"sugarcrepepp_{n}_*",),
             origin=f"github {SUGARCREPEPP[0]}@{SUGARCREPEPP[1][:7]} data/{n}.json (sha256 from the mirror)",
             licence="MIT")
      for n, (sha, size) in _SUGARCREPEPP_FILES.items()),
    Source("negation_steering/train_data.json", _gh(*NEGATION_STEERING, "data/train_data.json"),
           "fd085671659d73629a1e3036613c7e88b7b09f72acadcefeb618254a8d358694", 475303,
           origin=f"github {NEGATION_STEERING[0]}@{NEGATION_STEERING[1][:7]} data/train_data.json (sha256 from the "
                  "mirror): the 3,979 caption pairs `--model steer` fits its directions on; no task reads it",
           licence="no licence file"),
    Source("simpleneg/simpleneg.json", _gh(*NEGATION_STEERING, "data/simpleneg.json"),
           "18ab81a1dd0116c249dceeaaedac777433549bd91b7e2beb038fde0dd7aa5924", 107229, ("simpleneg",),
           origin=f"github {NEGATION_STEERING[0]}@{NEGATION_STEERING[1][:7]} data/simpleneg.json (sha256 from the "
                  "mirror): 900 [negated query, negation question, verification question] rows",
           licence="no licence file"),
    Source("negrefcocog/NegRefCOCOg.json", _gh(*NEGATIONCLIP, "NegRefCOCOg/NegRefCOCOg.json"),
           "e3519e02c26aa3d507e7cb32f4e202375bc8860b5cb7cb4c34ad436cf063031f", 232340, ("negrefcocog",),
           origin=f"github {NEGATIONCLIP[0]}@{NEGATIONCLIP[1][:7]} NegRefCOCOg/NegRefCOCOg.json (sha256 from the mirror)",
           licence="MIT (parkquasar/NegationCLIP)"),
    Source("winoground/default/test/0000.parquet",
           "hf://datasets/facebook/winoground@refs/convert/parquet/default/test/0000.parquet", None, None,
           ("winoground",), gated=True,
           origin="Hugging Face dataset facebook/winoground, " + UNPINNED.format(why=PARQUET + "; mteb's Winoground "
                  "pins b400e173549071916ad1b3d449293bc8d8b4b763 of main, whose loader script the conversion reads "
                  "(mteb/tasks/image_text_pair_classification/eng/winoground.py)"),
           licence="gated: accept the terms on the dataset page; research use, images licensed from Getty Images"),
    Source("bivlc/default/test/0000.parquet",
           "hf://datasets/imirandam/BiVLC@refs/convert/parquet/default/test/0000.parquet", None, None, ("bivlc",),
           origin="Hugging Face dataset imirandam/BiVLC, " + UNPINNED.format(why=PARQUET), licence="MIT"),
    *(Source(f"mrmr_negation/{part}/test/0000.parquet",
             f"hf://datasets/MRMRbenchmark/negation@refs/convert/parquet/{part}/test/0000.parquet", None, None,
             ("mrmr_negation",),
             origin="Hugging Face dataset MRMRbenchmark/negation, " + UNPINNED.format(
                 why=PARQUET + "; the task YAML notes mteb pins ee5e669c8b257790a9c66c4d9464f6d77f33636b of main, "
                     "not in the installed mteb 2.26.24"), licence="MIT")
      for part in ("query", "corpus", "qrels")),
    *(Source(f"vismin/data/test/data-0000{k}-of-00003.arrow",
             f"hf://datasets/mair-lab/vismin-bench@{VISMIN}/data/test/data-0000{k}-of-00003.arrow", None, None,
             ("vismin_*",),
             origin=f"Hugging Face dataset mair-lab/vismin-bench@{VISMIN[:7]} (the commit the vismin_* YAMLs pin; "
                    "SHA-256 recorded at first download)", licence="CC BY 4.0")
      for k in range(3)),
    Source("naturalbench/NaturalBench-Retrieval.zip",
           f"hf://datasets/BaiqiL/NaturalBench@{NATURALBENCH}/NaturalBench-Retrieval.zip", None, None,
           ("naturalbench_retrieval",), unpack=Unpack("naturalbench", only="NaturalBench-Retrieval/"),
           done="naturalbench/NaturalBench-Retrieval",
           origin=f"Hugging Face dataset BaiqiL/NaturalBench@{NATURALBENCH[:7]} (the commit the task YAML pins, which "
                  "uploaded the zip; its LFS SHA-256 is not copied here: the archive's SHA-256 is recorded at first "
                  "download)", licence="Apache-2.0; Flickr30k images under their owners' terms"),
    Source("mmvp_vlm", "hf://datasets/MMVP/MMVP_VLM@main", None, None, ("mmvp_vlm",),
           patterns=("Questions.csv", "MLLM_VLM Images/*"),
           origin="Hugging Face dataset MMVP/MMVP_VLM, " + UNPINNED.format(
               why="the task YAML reads main, whose last commit of the files it notes as 211372d, too short to ask "
                   "the Hub for"), licence="MIT"),
    Source("vinoground/vinoground.csv", "hf://datasets/HanSolo9682/Vinoground@main/vinoground.csv", None, None,
           ("vinoground",), origin="Hugging Face dataset HanSolo9682/Vinoground, " + UNPINNED.format(
               why="the authors' README clones main; no commit pinned anywhere found"),
           licence="the dataset card's terms (clips from VATEX / YouTube)"),
    Source("vinoground/vinoground_videos.zip", "hf://datasets/HanSolo9682/Vinoground@main/vinoground_videos.zip",
           None, None, ("vinoground",), unpack=Unpack("vinoground", only="vinoground_videos/"),
           done="vinoground/vinoground_videos",
           origin="Hugging Face dataset HanSolo9682/Vinoground, " + UNPINNED.format(
               why="the authors' README clones main; no commit pinned anywhere found"),
           licence="the dataset card's terms (clips from VATEX / YouTube)"),
    # sources no program may fetch -------------------------------------------------------------------------------
    Source("flickr30k/flickr30k-images", tasks=("aro_flickr_order",), done="flickr30k/flickr30k-images",
           manual="Flickr30k images are licence-gated: sign the form at https://forms.illinois.edu/sec/229675, "
                  "download flickr30k-images.tar.gz from the link you are sent, and unpack it so that the "
                  "images lie in {target}/ (e.g. {target}/1000092795.jpg).",
           origin="ARO's Flickr30k loader (sign-up URL)", licence="Flickr30k terms of use"),
    Source("msrvtt/videos", tasks=MSRVTT_TASKS, done="msrvtt/videos",
           manual="MSR-VTT videos: download them from the MediaFire folder that NegBench's datasets.md links "
                  "(https://www.mediafire.com/folder/h14iarbs62e7p/shared), or MSRVTT.zip from Frozen-in-Time "
                  "(https://www.robots.ox.ac.uk/~maxbain/frozen-in-time/data/MSRVTT.zip, videos/all/), and put the "
                  "video<N>.mp4 files in {target}/.",
           origin="m1k2zoo/negbench datasets.md", licence="MSR-VTT: research use"),
    *(Source(f"nt2vr/{c}", tasks=tasks, done=c,
             manual="nT2VR text data is on Baidu Pan only (https://pan.baidu.com/s/14awvWfhitDvF3CVNKbcA5Q?pwd=5m34, "
                    f"from github.com/ruc-aimc-lab/nT2VR's README): unpack it into the data root so that "
                    f"{{target}}/TextData/{c}.caption.txt and {{target}}/VideoSets/{c}.txt exist; the {media} of "
                    f"{where} go in {{target}}/{media}/ (named by the ids in VideoSets/{c}.txt).",
             origin="ruc-aimc-lab/nT2VR@35babc0 README", licence="no licence file; media under their own terms")
      for c, (tasks, media, where) in _NT2VR.items()),
    Source("ccneg", tasks=("ccneg",), done="ccneg",
           manual="CC-Neg is on Proton Drive (links in github.com/jaisidhsingh/CoN-CLIP, ccneg_dataset/README.md): "
                  "download ccneg_preprocessed.pt and ccneg_images.zip into {target}/ and unzip the images there.",
           origin="jaisidhsingh/CoN-CLIP README", licence="see CoN-CLIP"),
    Source("negbench/hardneg_syn", tasks=("negbench_*hardneg_syn",), done="hardneg_syn",
           manual="NegBench's HardNeg-Syn images are not published anywhere found; ask the authors "
                  "(github.com/m1k2zoo/negbench) and put them in <data root>/hardneg_syn/.",
           origin="m1k2zoo/negbench datasets.md", licence="see NegBench"),
    Source("negbench/chexpert", tasks=("negbench_mcq_chexpert*",), done="chexpert",
           manual="CheXpert needs a Kaggle or Stanford account (https://www.kaggle.com/datasets/ashery/chexpert): "
                  "download it and put the train/ and valid/ folders in <data root>/chexpert/; NegBench's CheXpert "
                  "CSVs are in its Drive folder (github.com/m1k2zoo/negbench datasets.md), into <data root>/negbench/.",
           origin="m1k2zoo/negbench datasets.md", licence="CheXpert research use agreement"),
    *(Source(f"negbench/{csv}", tasks=(task,), done=f"negbench/{csv}",
             manual=f"NegBench's {csv} is only in the authors' Google Drive folder (github.com/m1k2zoo/negbench "
                    "datasets.md; a folder no program may fetch, and no mirror found): download it and put it at "
                    "{target}.", origin="m1k2zoo/negbench datasets.md", licence="CheXpert research use agreement")
      for csv, task in _CHEXPERT_CSVS.items()),
)

# A benchmark name stands for its tasks: `negharness fetch sugarcrepe` = `negharness fetch 'sugarcrepe_*'`.
BENCHMARKS: dict[str, tuple[str, ...]] = {
    "sugarcrepe": ("sugarcrepe_*",), "negbench": ("negbench_*",), "aro": ("aro_*",), "crepe": ("crepe_*",),
    "valse": ("valse_*",), "negvqa": ("negvqa_*",), "nein": ("nein_*",), "ccneg": ("ccneg",),
    "nt2vr": NT2VR_TASKS, "sugarcrepepp": ("sugarcrepepp_*",), "vismin": ("vismin_*",), "mrmr": ("mrmr_*",),
    "naturalbench": ("naturalbench_*",),
}


def read_sources(path: str | Path) -> tuple[Source, ...]:
    """A ``--sources`` file: a JSON list of sources (the field names of `Source`), checked by field."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--sources {path}: cannot read ({exc})") from exc
    if not isinstance(rows, list):
        raise UserError(f"--sources {path}: expected a JSON list of sources")
    return tuple(_source(row, f"--sources {path}: entry {i}") for i, row in enumerate(rows))


def _source(row: Any, where: str) -> Source:
    known = {f.name for f in fields(Source)}
    if not isinstance(row, dict) or not isinstance(row.get("name"), str):
        raise UserError(f"{where}: expected an object with a 'name'")
    unknown = sorted(set(row) - known)
    if unknown:
        raise UserError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(known))})")
    values = dict(row)
    for key in ("tasks", "patterns"):
        values[key] = tuple(values.get(key, ()))
    if isinstance(values.get("unpack"), dict):
        values["unpack"] = Unpack(**values["unpack"])
    return Source(**values)


def human_size(size: int | None) -> str:
    """1.2 GB, 815.6 MB, 473 kB; "size unknown" for None."""
    if size is None:
        return "size unknown"
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit in ("B", "kB") else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover

