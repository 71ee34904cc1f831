"""The embedded world: scenes, rendering, media and query sets, a data source with no download.

Importing it registers the world's closed-language tagger with the text builders
(`negharness.world.tagger`), so nothing built from its captions needs NLTK's data.
"""

from negharness.world import tagger as _tagger  # noqa: F401 (registers the world's tagger)
