/**
 * The records of the person a list question is about. A question that collects mentions of a
 * person ("What activities does Melanie partake in?") is about someone named in nearly every record
 * of a conversation between two people, so the entity route leaves the name out as unselective
 * (SELECTIVE_SHARE in query.ts), and the name-free dense list (name-free.ts) searches every record:
 * the other speaker's records take about half of its depth. The same name-free question searched
 * among the records that name the person alone reaches about twice as deep into that person's
 * mentions, where a list's evidence is ("Melanie went camping with her family", sessions away from
 * her other activities).
 *
 * Its list is a second opinion that counts half a list's in the fusion (`RankedList.weight`): at
 * full weight the person's records crowd out the turns and the other person's records that an
 * inference about someone also rests on. One list, for the first such name: a question naming two
 * ("What do Jon and Gina both like?") with a list for each lost more than it found. Dev-set budget
 * sweeps of both: docs/benchmarks.md.
 */

export const PERSON_LIST_WEIGHT = 0.5;

/** The name whose records get the list: the first of the question's unselective names, if any. */
export const personOf = (commonNames: readonly string[]): string | undefined => commonNames[0];
