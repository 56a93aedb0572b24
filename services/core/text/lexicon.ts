/**
 * Small, general English word lists shared by the text analysis of every stage: the encoder's
 * deterministic extractor and the statement analysis that update candidates and consolidation
 * read. Nothing here names a dataset sentence: these are closed-class English words (stop words,
 * pronouns, auxiliaries), a phatic / small-talk lexicon, and a tiny table of kinship words whose
 * gender is part of the word itself.
 */

const set = (words: string): ReadonlySet<string> => new Set(words.split(/\s+/).filter((w) => w.length > 0));

/** Function words and very common verbs/adverbs that carry no topic. Lower case. */
export const STOP_WORDS = set(`
a about above after again against all almost also although always am an and any anyone anything anyway are aren't
around as at away back be became because become been before being below best better between both but by can can't
cannot could couldn't did didn't do does doesn't doing don't done down during each either else even ever every
everyone everything few for from further get gets getting go goes going gone got gotten had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've
if in into is isn't it it's its itself just kinda kind least less let let's like likely lot lots made make makes
making many may maybe me might mine more most much must my myself near need needs never new next no nor not nothing
now of off often oh on once one only onto or other others ought our ours ourselves out over own per perhaps please
pretty quite rather really right said same say says see seem seems shall she she'd she'll she's should shouldn't
since so some somebody someone something sometimes somewhat soon still such sure take than that that's the their
theirs them themselves then there there's these they they'd they'll they're they've thing things think this those
though through thus till to too toward towards under until up upon us use used very via want wants was wasn't way we
we'd we'll we're we've well were weren't what what's whatever when where where's whether which while who who's whom
whose why will with within without won't would wouldn't yet you you'd you'll you're you've your yours yourself
yourselves also actually totally definitely absolutely literally basically especially anymore already ago lately
recently today tomorrow yesterday tonight week weeks month months year years day days time times gonna wanna gotta
thinkin lookin doin goin tryin sort stuff bit able across along among yeah yes yep nope okay ok
`);

/**
 * Phatic / small-talk words: greetings, thanks, reactions, evaluations without content. A
 * sentence whose words all fall in STOP_WORDS, this set, or the speakers' names is phatic.
 */
export const PHATIC_WORDS = set(`
hi hey hello hiya howdy yo bye goodbye cya later soon thanks thank thx ty cheers welcome wow whoa woah omg oh ooh
aw aww awww haha hahaha hah lol lmao hehe yay woohoo ugh hmm hm um uh ah ahh great awesome cool nice amazing
wonderful fantastic incredible super lovely sweet brilliant excellent fabulous terrific gorgeous beautiful
stunning impressive inspiring glad happy sad sorry proud excited congrats congratulations good bad fine ok okay
alright sounds sound seems totally true exactly agree indeed course absolutely definitely surely certainly
appreciate appreciated care luck guess hear heard hearing glad nice talk talking chat chatting catch catching
hope hoping wish wishing keep going mean means know knew see seeing look looks looking feel feels feeling fun
interesting cute neat wild crazy insane tough hard rough shame pity same too also really so very much such
day hows how's what's up news new anything everything else going doing lately been well hanging hang
stay safe soon take tell telling let share sharing glad wow thing things stuff inspire inspired inspires
touching heartwarming rad dope epic jealous blast meet meeting chatted catchup update updates
wait waiting exciting powerful special emotional meaningful perfect
`);

export const FIRST_PERSON = set("i me my mine myself i'm i've i'll i'd");
export const SECOND_PERSON = set("you your yours yourself yourselves you're you've you'll you'd ya");
export const THIRD_PERSON = set("he him his himself she her hers herself they them their theirs themselves");

/** Gender is part of these words themselves; this is the only gender table used. */
export const KIN_FEMALE = set(`
mom mother mum mama mommy sister sis daughter wife girlfriend aunt auntie grandma grandmother granny niece
stepmom stepmother stepdaughter stepsister fiancee bride
`);
export const KIN_MALE = set(`
dad father papa daddy brother bro son husband boyfriend uncle grandpa grandfather nephew stepdad stepfather stepson
stepbrother fiance groom
`);
export const KIN_PLURAL = set(`
kids children parents siblings sisters brothers daughters sons friends family grandparents grandkids
grandchildren cousins folks twins classmates coworkers colleagues neighbors neighbours students teammates
`);
export const KIN_NEUTRAL = set(`
friend partner spouse cousin kid child baby boss coworker colleague neighbor neighbour roommate mentor teacher
classmate teammate bestie buddy pal therapist doctor student grandchild grandkid sibling
`);

/** Relation words (record type "relation"). */
export const RELATION_WORDS = new Set<string>([
  ...KIN_FEMALE,
  ...KIN_MALE,
  ...KIN_PLURAL,
  ...KIN_NEUTRAL,
  ...set("married marriage divorced divorce engaged engagement dating wedding adopted adoption relationship"),
]);

export const PREFERENCE_WORDS = set(`
like likes liked love loves loved enjoy enjoys enjoyed favorite favourite favorites favourites prefer prefers
preferred hate hates hated dislike dislikes adore adores passion passionate fan keen fond into
`);

export const MONTHS = set(`
january february march april may june july august september october november december jan feb mar apr jun jul aug
sep sept oct nov dec
`);
export const WEEKDAYS = set(`
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
`);

/** Irregular past-tense forms (for tense cues). */
export const IRREGULAR_PAST = set(`
was were went did had got came saw took made told said bought found left met gave ran ate won lost began began
brought built caught chose drew drank drove fell felt flew forgot fought grew heard held hid hit hurt kept knew
led lent let meant paid put quit read rode rang rose sang sat sold sent set shook shot showed slept spent spoke
stood stole swam taught thought threw understood woke wore wrote became broke
`);

/** Words that, after "am/is/was", make an -ed word an adjective rather than a past verb. */
export const BE_WORDS = set("am is are was were be been being i'm you're he's she's it's we're they're so very really");

/** Common base-form verbs: "I love" -> "Jon loves". Only these get a third-person -s. */
export const BASE_VERBS = set(`
love like enjoy want need think feel hope plan know work live go have do take make play try prefer hate miss
believe find guess mean remember wish see get keep spend teach watch say use own run read write paint cook
practice practise volunteer agree appreciate admire understand dance sing swim study learn teach travel visit
drive bake draw cherish adore prefer care help support collect look listen mind forget imagine wonder recommend
tend struggle attend join host coach teach run hike camp fish garden knit sew plan dream
`);

/** Adverbs that may sit between a subject and its verb ("I really love"). */
export const SUBJECT_ADVERBS = set(
  "really also just still always never often usually sometimes even actually totally truly absolutely definitely",
);

export const MODALS = set("can could will would shall should may might must");

/** Prepositions that already introduce a date ("on May 7th", "since 2016"). */
export const DATE_PREPOSITIONS = set("on in at during since by until till from of before after around about through");
