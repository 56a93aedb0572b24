/**
 * The most frequent English words, most frequent first (after general web/book frequency lists).
 * Rank r stands for a Zipf probability p(w) ~ 0.1 / r; words not listed are treated as rarer than
 * all of these, which is what makes their self-information high.
 */
export const COMMON_WORDS: readonly string[] =
  `the of and to a in is it you that he was for on are with as i his they be at one have this
from or had by not word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has look more
day could go come did number sound no most people my over know water than call first who may down side been now find
any new work part take get place made live where after back little only round man year came show every good me give
our under name very through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand port large spell add
even land here must big high such follow act why ask men change went light kind off need house picture try us again
animal point mother world near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run don't while press close night real life few north open seem together next white
children begin got walk example ease paper group always music those both mark often letter until mile river car feet care
second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose
leave song measure door product black short numeral class wind question happen complete ship area half rock order fire
south problem piece told knew pass since top whole king space heard best hour better true during hundred five remember step
early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel toward
war lay against pattern slow center love person money serve appear road map rain rule govern pull cold notice voice unit
power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound
done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute strong special
mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface
deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language among i'm it's that's
really yeah hey hi thanks thank great awesome cool wow lol haha glad happy nice sounds sound definitely totally pretty
am being doing going gonna lot lots things something anything everything am'nt can't won't didn't doesn't isn't wasn't
you're i've i'll we're they're there's what's let's`
    .split(/\s+/)
    .filter(Boolean);

const RANK = new Map<string, number>();
COMMON_WORDS.forEach((w, i) => {
  if (!RANK.has(w)) RANK.set(w, i + 1);
});

/** Self-information -log2 p(w) under a Zipf law over the ranked list; unknown words rank past it. */
export const selfInformation = (word: string): number => {
  const rank = RANK.get(word.toLowerCase()) ?? COMMON_WORDS.length * 4;
  return -Math.log2(0.1 / rank);
};
