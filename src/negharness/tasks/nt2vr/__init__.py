"""nT2VR (Ma et al.): text-to-video retrieval with negated and composed queries."""

from negharness.api.published import tables_beside

# the papers' tables this package's tasks own: registered with each task, passed to published_notes
PUBLISHED = tables_beside(__file__)
