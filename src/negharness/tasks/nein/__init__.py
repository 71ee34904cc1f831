"""NeIn (Bui et al.): image editing with negative instructions, removal and retention."""

from negharness.api.published import tables_beside

# the papers' tables this package's tasks own: registered with each task, passed to published_notes
PUBLISHED = tables_beside(__file__)
