import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { findDates, resolveDates } from "../../services/encoder/dates.ts";

const at = (day: string): { at: string } => ({ at: `${day}T00:00:00.000Z` });
const range = (from: string, to: string): { from: string; to: string } => ({
  from: `${from}T00:00:00.000Z`,
  to: `${to}T23:59:59.999Z`,
});

describe("encoder dates: relative expressions across month and year ends", () => {
  const cases: [string, string, string, Record<string, string>, string][] = [
    // [sentence, said at, expected text, expected time, label]
    [
      "I went there yesterday.",
      "2023-01-01T10:00:00Z",
      "I went there on 2022-12-31.",
      at("2022-12-31"),
      "yesterday over new year",
    ],
    [
      "I went there yesterday.",
      "2023-03-01T09:00:00Z",
      "I went there on 2023-02-28.",
      at("2023-02-28"),
      "yesterday over a month end",
    ],
    ["I went there yesterday.", "2024-03-01T09:00:00Z", "I went there on 2024-02-29.", at("2024-02-29"), "leap day"],
    [
      "We moved last month.",
      "2023-01-15T10:00:00Z",
      "We moved in December 2022.",
      range("2022-12-01", "2022-12-31"),
      "last month over new year",
    ],
    [
      "I will start next month.",
      "2022-12-20T10:00:00Z",
      "I will start in January 2023.",
      range("2023-01-01", "2023-01-31"),
      "next month over new year",
    ],
    [
      "I ran a race last week.",
      "2023-03-02T10:00:00Z",
      "I ran a race in the week of 2023-02-20.",
      range("2023-02-20", "2023-02-26"),
      "last week",
    ],
    [
      "I ran a race last week.",
      "2023-01-04T10:00:00Z",
      "I ran a race in the week of 2022-12-26.",
      range("2022-12-26", "2023-01-01"),
      "last week over new year",
    ],
    [
      "We meet next week.",
      "2022-12-29T10:00:00Z",
      "We meet in the week of 2023-01-02.",
      range("2023-01-02", "2023-01-08"),
      "next week over new year",
    ],
    [
      "Last Saturday I ran.",
      "2023-03-02T10:00:00Z",
      "On 2023-02-25 I ran.",
      at("2023-02-25"),
      "last Saturday, capitalised at start",
    ],
    [
      "I ran two days ago.",
      "2023-03-01T10:00:00Z",
      "I ran on 2023-02-27.",
      at("2023-02-27"),
      "two days ago over a month end",
    ],
    [
      "This month I ran a lot.",
      "2023-03-02T10:00:00Z",
      "In March 2023 I ran a lot.",
      range("2023-03-01", "2023-03-31"),
      "this month",
    ],
    [
      "I started painting last year.",
      "2023-01-02T10:00:00Z",
      "I started painting in 2022.",
      range("2022-01-01", "2022-12-31"),
      "last year",
    ],
    [
      "I graduated in 2022.",
      "2023-03-02T10:00:00Z",
      "I graduated in 2022.",
      range("2022-01-01", "2022-12-31"),
      "bare year",
    ],
    [
      "I have painted since 2016.",
      "2023-03-02T10:00:00Z",
      "I have painted since 2016.",
      range("2016-01-01", "2016-12-31"),
      "since a year",
    ],
    [
      "I went hiking last weekend.",
      "2023-06-05T10:00:00Z",
      "I went hiking on the weekend of 2023-06-03.",
      range("2023-06-03", "2023-06-04"),
      "last weekend",
    ],
    [
      "That trip this past weekend was fun.",
      "2023-10-20T10:00:00Z",
      "That trip on the weekend of 2023-10-14 was fun.",
      range("2023-10-14", "2023-10-15"),
      "this past weekend",
    ],
    [
      "We had a quiet weekend at home.",
      "2023-07-17T10:00:00Z",
      "We had a quiet weekend (the weekend of 2023-07-15) at home.",
      range("2023-07-15", "2023-07-16"),
      "a noun after an indefinite article keeps its word, the date follows it",
    ],
    [
      "It was an awesome night with friends!",
      "2023-07-17T10:00:00Z",
      "It was an awesome night (2023-07-17) with friends!",
      at("2023-07-17"),
      "an indefinite night",
    ],
    [
      "I lost my job as a banker yesterday.",
      "2023-01-20T10:00:00Z",
      "I lost my job as a banker on 2023-01-19.",
      at("2023-01-19"),
      "an adverb of time after a noun phrase with an article is replaced",
    ],
    [
      "We had a great time this weekend.",
      "2023-07-17T10:00:00Z",
      "We had a great time on the weekend of 2023-07-22.",
      range("2023-07-22", "2023-07-23"),
      "a determined expression after a noun phrase is an adverbial, replaced",
    ],
    [
      "I will call you tomorrow.",
      "2022-12-31T23:00:00Z",
      "I will call you on 2023-01-01.",
      at("2023-01-01"),
      "tomorrow over new year",
    ],
    [
      "Last year was hard.",
      "2023-05-01T10:00:00Z",
      "2022 was hard.",
      range("2022-01-01", "2022-12-31"),
      "date as the subject",
    ],
    [
      "I finished it over the weekend.",
      "2023-07-12T10:00:00Z",
      "I finished it over the weekend of 2023-07-08.",
      range("2023-07-08", "2023-07-09"),
      "over the weekend keeps its preposition (not 'over on the weekend of')",
    ],
    [
      "I ran a marathon in early June.",
      "2023-07-12T10:00:00Z",
      "I ran a marathon in early June 2023.",
      range("2023-06-01", "2023-06-30"),
      "early June keeps its words (not 'in early in June')",
    ],
  ];
  for (const [sentence, saidAt, text, time, label] of cases) {
    it(label, () => {
      const r = resolveDates(sentence, saidAt);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, time);
    });
  }
});

describe("encoder dates: absolute dates without a year, ranges", () => {
  it("May 7th said before it in a future sentence stays in the same year", () => {
    const r = resolveDates("I will go to Paris on May 7th.", "2023-03-02T10:00:00Z");
    assert.equal(r.text, "I will go to Paris on 2023-05-07.");
    assert.deepEqual(r.time, at("2023-05-07"));
  });
  it("May 7th in a past-tense sentence said in March is last year's", () => {
    const r = resolveDates("I went to Paris on May 7th.", "2023-03-02T10:00:00Z");
    assert.deepEqual(r.time, at("2022-05-07"));
  });
  it("a month name after 'in' is the whole month, on the side the tense says", () => {
    assert.deepEqual(
      resolveDates("I went there in May.", "2023-03-02T10:00:00Z").time,
      range("2022-05-01", "2022-05-31"),
    );
    assert.deepEqual(
      resolveDates("I went there in May.", "2023-06-02T10:00:00Z").time,
      range("2023-05-01", "2023-05-31"),
    );
  });
  it("an explicit full date", () => {
    const r = resolveDates("It happened on 20 January, 2023.", "2023-05-02T10:00:00Z");
    assert.deepEqual(r.time, at("2023-01-20"));
  });
  it("a day range", () => {
    const r = resolveDates("I was there from May 3 to May 5.", "2023-06-02T10:00:00Z");
    assert.equal(r.text, "I was there from 2023-05-03 to 2023-05-05.");
    assert.deepEqual(r.time, range("2023-05-03", "2023-05-05"));
  });
  it("a bare weekday in a past sentence is the previous one", () => {
    assert.deepEqual(resolveDates("I went there on Saturday.", "2023-03-02T10:00:00Z").time, at("2023-02-25"));
  });
  it("vague 'a few years ago' is marked approximate", () => {
    const r = resolveDates("I moved here a few years ago.", "2023-03-02T10:00:00Z");
    assert.equal(r.text, "I moved here around 2020.");
  });
});

describe("encoder dates: seasons", () => {
  const july = "2023-07-20T10:00:00Z";
  const cases: [string, string, string, Record<string, string>][] = [
    // [sentence, said at, expected text, expected time]
    ["We went camping last summer.", july, "We went camping in summer 2022.", range("2022-06-01", "2022-08-31")],
    ["This summer has been great.", july, "Summer 2023 has been great.", range("2023-06-01", "2023-08-31")],
    ["Last Summer I went to Rome.", july, "In summer 2022 I went to Rome.", range("2022-06-01", "2022-08-31")],
    ["Next spring I'll start school.", july, "In spring 2024 I'll start school.", range("2024-03-01", "2024-05-31")],
    ["In the summer of 2022 we met.", july, "In summer 2022 we met.", range("2022-06-01", "2022-08-31")],
    ["I loved summer 2022.", july, "I loved summer 2022.", range("2022-06-01", "2022-08-31")],
    ["Fall of 2021 was rough.", july, "Autumn 2021 was rough.", range("2021-09-01", "2021-11-30")],
    ["Last winter was cold.", july, "Winter 2022-23 was cold.", range("2022-12-01", "2023-02-28")],
    // "last summer" said in October is the one just ended.
    [
      "We went camping last summer.",
      "2023-10-02T10:00:00Z",
      "We went camping in summer 2023.",
      range("2023-06-01", "2023-08-31"),
    ],
    // Nothing places it: the nearest, on the side the tense says.
    ["We went skiing in the winter.", july, "We went skiing in winter 2022-23.", range("2022-12-01", "2023-02-28")],
    [
      "We will go skiing over the winter.",
      july,
      "We will go skiing over winter 2023-24.",
      range("2023-12-01", "2024-02-29"),
    ],
    [
      "During the summer, I painted a lot.",
      july,
      "During summer 2023, I painted a lot.",
      range("2023-06-01", "2023-08-31"),
    ],
  ];
  for (const [sentence, saidAt, text, time] of cases) {
    it(JSON.stringify(sentence), () => {
      const r = resolveDates(sentence, saidAt);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, time);
    });
  }
  it("leaves a habit, a season that qualifies a noun and a fall that is not one as said", () => {
    for (const s of [
      "In the winter we ski.",
      "My kids are so excited about summer break!",
      "Over the summer break we rested.",
      "He hurt his knee in the fall.",
      "We love the last summer camp of the year.",
      "We went to a fair in Spring Valley.",
    ])
      assert.deepEqual(findDates(s, july), [], s);
  });
});

describe("encoder dates: the week before last, holidays", () => {
  const july = "2023-07-20T10:00:00Z";
  const cases: [string, string, Record<string, string>][] = [
    // [sentence, expected text, expected time], said on Thursday 2023-07-20
    // Before, "in the week of 2023-07-10 last": chrono read "the week before" as last week.
    ["I started the week before last.", "I started in the week of 2023-07-03.", range("2023-07-03", "2023-07-09")],
    [
      "We went camping the weekend before last.",
      "We went camping on the weekend of 2023-07-08.",
      range("2023-07-08", "2023-07-09"),
    ],
    ["The month before last I moved.", "In May 2023 I moved.", range("2023-05-01", "2023-05-31")],
    ["The year before last was hard.", "2021 was hard.", range("2021-01-01", "2021-12-31")],
    // A holiday keeps its name (how people ask about it), its day after it.
    ["I did it last Christmas.", "I did it last Christmas (2022-12-25).", at("2022-12-25")],
    ["On Christmas Eve we sang.", "On Christmas Eve (2022-12-24) we sang.", at("2022-12-24")],
    ["We carved pumpkins on Halloween.", "We carved pumpkins on Halloween (2022-10-31).", at("2022-10-31")],
    ["I will bake pies for Thanksgiving.", "I will bake pies for Thanksgiving (2023-11-23).", at("2023-11-23")],
    ["Thanksgiving 2022 was lovely.", "Thanksgiving 2022 (2022-11-24) was lovely.", at("2022-11-24")],
    ["We hunted eggs on Easter.", "We hunted eggs on Easter (2023-04-09).", at("2023-04-09")],
    [
      "We watched fireworks on the Fourth of July.",
      "We watched fireworks on the Fourth of July (2023-07-04).",
      at("2023-07-04"),
    ],
    ["Next Valentine's Day I will propose.", "Next Valentine's Day (2024-02-14) I will propose.", at("2024-02-14")],
  ];
  for (const [sentence, text, time] of cases) {
    it(JSON.stringify(sentence), () => {
      const r = resolveDates(sentence, july);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, time);
    });
  }
  it("dates a part of a year by its year and keeps the words (before, no date at all)", () => {
    for (const [s, year] of [
      ["I started in early 2023.", "2023"],
      ["Since mid-2022 I run daily.", "2022"],
      ["It was late 2022.", "2022"],
      ["By the end of 2021 we were done.", "2021"],
      ["We met at the beginning of 2022.", "2022"],
    ] as const) {
      const r = resolveDates(s, july);
      assert.equal(r.text, s);
      assert.deepEqual(r.time, range(`${year}-01-01`, `${year}-12-31`), s);
    }
    assert.deepEqual(findDates("We raised 2020 dollars.", july), []);
  });

  it("dates a time next to a holiday by its own days, the holiday's tense kept", () => {
    // Said 2023-07-20. Before, "the weekend before Christmas" was dated Christmas Day, and "the day
    // after Thanksgiving" (merged by chrono) the day after this year's, whatever the tense.
    for (const [s, text, time] of [
      [
        "I was there the weekend before Christmas.",
        "I was there the weekend before Christmas (the weekend of 2022-12-17).",
        range("2022-12-17", "2022-12-18"),
      ],
      [
        "We shopped the day after Thanksgiving.",
        "We shopped the day after Thanksgiving (2022-11-25).",
        at("2022-11-25"),
      ],
      [
        "The week before Easter I was sick.",
        "The week before Easter (2023-04-02 to 2023-04-08) I was sick.",
        range("2023-04-02", "2023-04-08"),
      ],
      ["I'll visit the day after Christmas.", "I'll visit the day after Christmas (2023-12-26).", at("2023-12-26")],
      // chrono joins "night before" to the holiday here; the words before it stay as written.
      ["The night before Christmas we sang.", "The night before Christmas (2022-12-24) we sang.", at("2022-12-24")],
    ] as const) {
      const r = resolveDates(s, july);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, time, s);
    }
  });

  it("moves Easter and Thanksgiving with the year", () => {
    assert.deepEqual(resolveDates("Easter 2024 was early.", july).time, at("2024-03-31"));
    assert.deepEqual(resolveDates("Thanksgiving 2024 was quiet.", july).time, at("2024-11-28"));
  });
  it("leaves a habit and a holiday that qualifies a noun as said", () => {
    for (const s of [
      "At Christmas we go to my parents'.",
      "We got a Christmas tree.",
      "I love Halloween costumes.",
      "We sailed to Easter Island.",
    ])
      assert.deepEqual(findDates(s, july), [], s);
  });
});

describe("encoder dates: counted from the story, rough counts, counts chrono leaves", () => {
  const friday = "2023-06-16T21:38:00Z";
  it("leaves a date counted from another event as said, with no time (before, the turn's neighbours)", () => {
    // Before: "the next day" was 2023-06-17, "two days later" 2023-06-18, "the year after" 2024,
    // "the week before my birthday" became "in the week of 2023-06-05 Jon's birthday".
    for (const s of [
      "We arrived at noon and left the next day.",
      "Two days later I got a call.",
      "A week later we went home.",
      "I started painting and sold my first piece the year after.",
      "I sold my first painting the day after.",
      "I went to a concert the week before my birthday.",
      "We went camping the weekend before the wedding.",
      "I started a new job and the following week I got sick.",
      "My mom visited the previous weekend.",
      "The night before, I couldn't sleep.",
      "The next morning we hiked.",
      "We moved and the next year we got a dog.",
      "I moved here a month before I met her.",
    ]) {
      const r = resolveDates(s, friday);
      assert.equal(r.text, s, s);
      assert.deepEqual(r.time, {}, s);
    }
    // The anchor of the rest stays: "in 2019" is still the record's year.
    assert.deepEqual(
      resolveDates("I started painting in 2019 and sold a piece the year after.", friday).time,
      range("2019-01-01", "2019-12-31"),
    );
  });
  it("keeps the dates that name their anchor or are the speaker's own", () => {
    assert.deepEqual(resolveDates("I adopted a dog the day before yesterday.", friday).time, at("2023-06-14"));
    assert.deepEqual(resolveDates("I'm going camping next weekend.", friday).time, range("2023-06-24", "2023-06-25"));
    assert.deepEqual(resolveDates("We will fly out the next week.", friday).time, range("2023-06-19", "2023-06-25"));
    // "a quiet weekend" is last weekend; "after" begins a clause there, not "the weekend after".
    assert.equal(
      resolveDates("I had a quiet weekend after we went camping two weekends ago.", friday).text,
      "I had a quiet weekend (the weekend of 2023-06-10) after we went camping on the weekend of 2023-06-03.",
    );
  });
  it("words a rough count of days or weeks against the turn's day, with no day of its own", () => {
    // Before: "a few days ago" was "on 2023-06-13", "several days ago" "on 2023-06-09".
    for (const [s, text] of [
      ["We met a few days ago at the gym.", "We met a few days before 2023-06-16 at the gym."],
      ["I saw her just a couple of days ago.", "I saw her just a couple of days before 2023-06-16."],
      ["I saw it several days ago.", "I saw it several days before 2023-06-16."],
      ["I went hiking a few weeks ago.", "I went hiking a few weeks before 2023-06-16."],
      ["I'll visit you in a few days.", "I'll visit you a few days after 2023-06-16."],
    ] as const) {
      const r = resolveDates(s, friday);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, {}, s);
    }
    // A month or a year stays approximate as before.
    assert.equal(resolveDates("We had a picnic a few months ago.", friday).text, "We had a picnic around March 2023.");
  });
  it("reads 'in' a while in a tale as how long, not when", () => {
    for (const s of ["I finished the painting in two weeks.", "We haven't talked in a few days."])
      assert.deepEqual(findDates(s, friday), [], s);
    assert.deepEqual(resolveDates("I will finish it in two weeks.", friday).time, range("2023-06-26", "2023-07-02"));
  });
  it("counts weekends, seasons and decades back (before, no date)", () => {
    for (const [s, text, time] of [
      [
        "I ran a marathon two weekends ago.",
        "I ran a marathon on the weekend of 2023-06-03.",
        range("2023-06-03", "2023-06-04"),
      ],
      ["I moved here two summers ago.", "I moved here in summer 2021.", range("2021-06-01", "2021-08-31")],
      ["We met three winters ago.", "We met in winter 2020-21.", range("2020-12-01", "2021-02-28")],
      ["I quit my job a decade ago.", "I quit my job around 2013.", range("2013-01-01", "2013-12-31")],
    ] as const) {
      const r = resolveDates(s, friday);
      assert.equal(r.text, text);
      assert.deepEqual(r.time, time, s);
    }
    // Said on a Monday, two weekends ago is the one before the weekend just gone.
    assert.deepEqual(
      resolveDates("We went camping two weekends ago.", "2023-07-17T14:31:00Z").time,
      range("2023-07-08", "2023-07-09"),
    );
  });
});

describe("encoder dates: what is not a date", () => {
  const none = [
    "I sat down and the Sun was out.",
    "We talked for 8 years.",
    "May I ask you something?",
    "I go there every Sunday.",
    "Meet me at 10.",
    "I'm going to the park now.",
    // A figure of speech (a dev turn said "… feels like just yesterday I put this dress on" of a
    // wedding five years before, and its record dated the dress the day before the turn).
    "Time flies, feels like just yesterday I put this dress on!",
    "It seems like only yesterday we met.",
  ];
  for (const s of none) it(JSON.stringify(s), () => assert.deepEqual(findDates(s, "2023-03-02T10:00:00Z"), []));

  it("computes in UTC whatever the reference time of day", () => {
    // 23:30 UTC on Jan 1st is still Jan 1st: "yesterday" is Dec 31st.
    assert.deepEqual(resolveDates("I left yesterday.", "2023-01-01T23:30:00Z").time, at("2022-12-31"));
    assert.deepEqual(resolveDates("I left yesterday.", "2023-01-01T00:10:00Z").time, at("2022-12-31"));
    assert.deepEqual(resolveDates("I left yesterday.", "2023-01-01T05:00:00+09:00").time, at("2022-12-30"));
  });
});
