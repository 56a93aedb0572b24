/**
 * The consolidation scenario, one copy for every runtime that runs it (test/e2e/consolidation.test.ts,
 * test/integration/distributed/maintenance.test.ts and consolidator-service.test.ts): two sessions two months apart
 * (moved city, changed job, reversed preference, near and exact duplicates, a Tokyo plan and Kyoto
 * trains that are both current) and a second conversation repeating a fact (a cross-conversation
 * duplicate).
 */
import type { TurnInput } from "../../services/core/requests.ts";

const at = (day: string, minute: number): string => `${day}T10:${String(minute).padStart(2, "0")}:00.000Z`;

const turns = (prefix: string, rows: readonly (readonly [string, string, string])[]): TurnInput[] =>
  rows.map(([day, speaker, text], i) => ({
    turnId: `${prefix}-${i}`,
    speaker,
    text,
    timestamp: at(day, i),
    sessionId: day,
    role: "user" as const,
  }));

export const LIFE: TurnInput[] = turns("life", [
  ["2024-01-10", "Ana", "I live in Boston with my two cats."],
  ["2024-01-10", "Ben", "Boston is lovely in winter."],
  ["2024-01-10", "Ana", "I work at Google as a designer."],
  ["2024-01-10", "Ben", "That sounds like a great job."],
  ["2024-01-10", "Ana", "I love sushi."],
  ["2024-01-10", "Ana", "My favourite band is Coldplay."],
  ["2024-01-10", "Ana", "My sister Cleo is a nurse in Lisbon."],
  ["2024-01-10", "Ana", "I'm planning a trip to Tokyo in April."],
  ["2024-03-12", "Ana", "I moved to Denver last month."],
  ["2024-03-12", "Ben", "Denver has great mountains."],
  ["2024-03-12", "Ana", "I now work at Microsoft."],
  ["2024-03-12", "Ana", "I don't like sushi anymore."],
  ["2024-03-12", "Ana", "My favorite band is Coldplay!"],
  ["2024-03-12", "Ana", "My sister Cleo is a nurse in Lisbon."],
  [
    "2024-03-12",
    "Ana",
    "Which trains go from Tokyo to Kyoto? I want to take the bullet train to Kyoto during my trip.",
  ],
]);

export const TRAVEL: TurnInput[] = turns("travel", [
  ["2024-04-02", "Ana", "My favorite band is Coldplay, still."],
  ["2024-04-02", "Ana", "I booked a hotel in Kyoto near the station."],
  ["2024-04-02", "Ben", "Kyoto will be beautiful in spring."],
]);
