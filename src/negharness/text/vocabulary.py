"""The words the caption rules know (people, animals, verbs that are no actions, particles, ...) and
lemmas by lemminflect: the vocabulary `phrases`, `tag_repair` and the composer share."""

from __future__ import annotations

from functools import lru_cache

STOP_WORDS = frozenset("""
a an the and or but if while of at by for with about against between into through during before after above
below to from up down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very can will just don should now
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing would could ought s t one two another its as very also
""".split())
MALE = frozenset("man boy guy gentleman father dad son husband king brother uncle actor player male boyfriend "
                 "grandfather grandpa he sir prince groom".split())
FEMALE = frozenset("woman girl lady mother mom daughter wife queen sister aunt actress female girlfriend "
                   "grandmother grandma she madam princess bride".split())
PEOPLE = MALE | FEMALE | frozenset("""person people someone somebody kid child baby player chef team student teacher
crowd family friend couple singer dancer athlete reporter host model cook worker driver rider musician band audience
soldier police officer doctor customer character group teen teenager youth adult individual fan celebrity star
artist performer gamer contestant judge anchor presenter speaker narrator tourist surfer skier skater biker
cyclist runner swimmer fighter wrestler boxer chef protestor protester human golfer comedian batter pitcher
goalkeeper quarterback batsman bowler pilot mermaid choir chorus cartoon superhero hero villain robot""".split())
ANIMALS = frozenset("""animal dog puppy cat kitten horse bird fish cow pig monkey bear lion tiger elephant deer sheep
goat duck chicken rabbit mouse rat snake turtle dolphin whale shark penguin panda fox wolf giraffe zebra parrot
hamster squirrel frog insect bug spider butterfly bee pet creature alligator crocodile buffalo hippo squid
octopus camel lizard kangaroo koala otter seal""".split())
VEHICLES = frozenset("car truck bus train plane airplane jet helicopter boat ship bike bicycle motorcycle vehicle "
                     "van suv tractor racecar kart scooter".split())
PLURAL_NOUNS = frozenset("clothes glasses pants shorts jeans news sports goggles scissors trousers stairs lyrics "
                         "graphics things others people headphones".split())
NUMERALS = {w: w for w in "two three four five six seven eight nine ten twelve".split()} | {
    str(i): w for i, w in enumerate("zero one two three four five six seven eight nine ten".split()) if i >= 2}
COLOURS = frozenset("red blue green yellow black white purple pink orange brown grey gray gold silver".split())
BE_LEMMAS = {"be"}
AUX_VERBS = {"be", "do", "have", "will", "can", "get"}
CLAUSE_BOUNDARY = {"while", "whilst", "and", "or", "but", "as", "when", "because", "then", ",", ";", ".", "who",
                   "which", "that", "where"}
# heads that name the recording or a quantity, not the one who acts: "a video of a man" -> "a man"
NOT_AGENTS = frozenset("video clip scene footage film movie trailer picture image photo screen show program "
                       "segment compilation montage slideshow commercial advertisement ad episode tutorial vlog "
                       "kind type sort part view shot closeup version animation news report title music song "
                       "audio voice sound background camera clips videos thing something graphic graphics logo "
                       "text words website page map diagram chart slide pop game match event competition tournament "
                        "concert performance debate ceremony".split())
# nouns that, before a subject's head, say where it was filmed rather than what it is ("a movie scene girl")
RECORDING_MODIFIERS = frozenset("scene scenes clip footage screen".split())
INDEFINITE = frozenset("someone somebody everyone everybody anyone anybody nobody something".split())
# a VBG that with the next noun is a noun compound, not a verb phrase ("and he cutting board")
VBG_COMPOUNDS = frozenset(("cutting board", "swimming pool", "living room", "dining table", "dining room",
                           "frying pan", "washing machine", "sleeping bag", "running shoes", "parking lot",
                           "shopping mall", "boxing ring", "wrestling ring", "driving range", "cooking show",
                           "baking sheet", "mixing bowl", "waiting room", "fishing rod", "singing competition",
                           "dancing competition", "talking head", "racing car", "rolling pin", "walking stick"))
QUANTITIES = frozenset("group couple bunch lot pair team crowd set number series few lots".split())
# verbs whose bare or light use no reader takes as an action a video shows (the authors drop a
# similar list: show, explain, talk, say, speak, argue, display, wear; go, make, get, do, try)
NON_ACTION_VERBS = frozenset("""
be have do get go make let seem appear need want try attempt begin start continue keep show display feature
depict contain include involve consist represent describe explain wear sport become remain tell ask say speak
argue talk discuss mention happen know think understand believe like love hate wish hope
""".split())
# people named plainly: after another noun they start a new clause ("play guitar | women sing")
PLAIN_PEOPLE = frozenset("man woman girl boy people person kid guy child lady".split())
# plural nouns the tagger's repair must never read as a verb ("on the voice kids")
NEVER_VERBS = frozenset("kids games video videos outfit outfits".split())
# singular nouns for many people: "a choir ... her hair" does not fit, "a choir ... each other" does
COLLECTIVES = QUANTITIES | frozenset("crowd audience band family choir chorus class orchestra army troop cast "
                                     "squad crew gang".split())
# people-like doers a caption gives no sex: "a cartoon ... her boyfriend" is a guess
UNSEXED = frozenset("cartoon character robot superhero hero villain".split())
# particles and adverbs that complete a verb ("lying down", "splitting up", "dancing together"): kept
# in the phrase (tagged RP) when no noun phrase follows them
PARTICLES = frozenset("up down out off away back around over together apart along aside forward backward "
                      "backwards inside outside".split())
# function words that change what a phrase says, so its key keeps them: "lie down" is not "lie",
# "dance with each other" / "with others" is not "dance"
KEY_FUNCTION_WORDS = frozenset("up down out off over other".split())
OBJECT_PRONOUNS = frozenset("them him her it me us you".split())
# -ing words that are nouns first ("designer clothing"), never retagged as participles
ING_NOUNS = frozenset("""clothing building painting ceiling wedding evening morning meeting drawing ring king thing
string wing spring swing offering ending opening beginning feeling recording setting""".split())
# verbs whose object does the next participle: "watching other people | walking down a runway"
PERCEPTION_VERBS = frozenset("watch see observe hear film record photograph notice view spot stare".split())
SUBORDINATORS = frozenset("while whilst as because when after before".split())
LEAD_VERBS = frozenset("start begin continue keep go prepare".split())  # "starts to sing": sings
INCOMPLETE_END_TAGS = {"DT", "JJ", "JJR", "JJS", "IN", "CC", "TO", "PRP$", "POS", "WDT", "CD"}
PRONOUNS = {"his": "he", "him": "he", "himself": "he", "her": "she", "herself": "she", "hers": "she",
            "their": "they", "them": "they", "themselves": "they", "its": "it", "itself": "it"}
# adverbs that complete a verb as an adjective would ("falling asleep", "staying home")
PREDICATIVE_ADVERBS = frozenset("asleep awake alone aboard ahead home upstairs downstairs abroad ashore".split())


@lru_cache(maxsize=65536)
def lemma(word: str, upos: str | None = None) -> str:
    """Lemma by lemminflect; without a part of speech, inflected-looking words are read as verbs."""
    from lemminflect import getLemma

    w = word.lower()
    if upos is None:
        lemmas = getLemma(w, upos="VERB") if w.endswith(("ing", "ed", "es", "s")) else (w,)
    else:
        lemmas = getLemma(w, upos=upos)
    return lemmas[0] if lemmas else w


def token_lemma(word: str, penn: str) -> str:
    if penn.startswith("NN"):
        return lemma(word, "NOUN")
    if penn.startswith("VB"):
        return lemma(word, "VERB")
    return word.lower()
