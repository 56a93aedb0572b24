/**
 * Writes disguised copy n of a LoCoMo file in the file's own format, as `bench locomo --disguise n`
 * asks it (services/bench/locomo-disguise.ts: speaker names and their short forms, six places,
 * every date n years earlier), so that code without the option (an older commit) can be measured
 * on the same copy with `--data`.
 *
 *   npx tsx scripts/locomo-disguise.ts <in.json> <copy> <out.json>
 */
import { readFileSync, writeFileSync } from "node:fs";
import { disguiseLocomoText, locomoDisguise, shiftedByYears } from "../services/bench/locomo-disguise.ts";
import { parseLocomo, parseSessionDate } from "../services/core/datasets/locomo.ts";

const [input, copyArg, output] = process.argv.slice(2);
const copy = Number(copyArg);
if (!input || !output || !Number.isInteger(copy) || copy < 1) {
  console.error("usage: npx tsx scripts/locomo-disguise.ts <in.json> <copy: 1, 2, …> <out.json>");
  process.exit(2);
}

/** The dataset's session date form ("1:56 pm on 8 May, 2023"), `years` later. */
const shiftedSessionDate = (text: string, years: number): string => {
  const d = shiftedByYears(parseSessionDate(text), years);
  const h = d.getUTCHours();
  const minutes = String(d.getUTCMinutes()).padStart(2, "0");
  return `${h % 12 === 0 ? 12 : h % 12}:${minutes} ${h < 12 ? "am" : "pm"} on ${d.getUTCDate()} ${d.toLocaleString("en-US", { month: "long", timeZone: "UTC" })}, ${d.getUTCFullYear()}`;
};

interface RawTurn {
  speaker: string;
  text: string;
  blip_caption?: string;
}
interface RawSample {
  sample_id: string;
  conversation: Record<string, unknown>;
  qa: { question: string; answer?: string | number }[];
}

const raw = JSON.parse(readFileSync(input, "utf8")) as RawSample[];
const conversations = parseLocomo(raw, input);
raw.forEach((sample, i) => {
  const d = locomoDisguise(conversations[i] as (typeof conversations)[number], copy);
  const text = (t: string): string => disguiseLocomoText(d, t);
  const conv = sample.conversation;
  for (const key of ["speaker_a", "speaker_b"]) conv[key] = d.names.get(conv[key] as string) ?? conv[key];
  for (const key of Object.keys(conv).filter((k) => /^session_\d+$/.test(k))) {
    for (const turn of conv[key] as RawTurn[]) {
      turn.speaker = d.names.get(turn.speaker) ?? turn.speaker;
      turn.text = text(turn.text);
      if (turn.blip_caption) turn.blip_caption = text(turn.blip_caption);
    }
    conv[`${key}_date_time`] = shiftedSessionDate(conv[`${key}_date_time`] as string, d.shiftYears);
  }
  for (const q of sample.qa) {
    q.question = text(q.question);
    // A year may be a JSON number ("answer": 2022); the loader reads numbers as text.
    if (typeof q.answer === "string") q.answer = text(q.answer);
    else if (typeof q.answer === "number") q.answer = Number(text(String(q.answer)));
  }
});
writeFileSync(output, JSON.stringify(raw));
console.log(`wrote ${output}: copy ${copy} of ${conversations.length} conversation(s)`);
