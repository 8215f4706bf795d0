// How the agent finds answers (docs/knowledge.md): documents cut into passages under their headings,
// kept in step by the database whatever writes them; BM25 over them with each tenant's own word
// statistics; the part of the passage that answers; and, on real text (Debian's manual pages, the
// answer benchmark's tuning corpus), first citations ahead of a BM25 library's on the same questions.
import { sql } from 'kysely';
import MiniSearch from 'minisearch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCorpus, loadQuestions } from '../../bench/answers/evaluate.js';
import { answerSentences } from '../../src/domain/agent/answer-sentences.js';
import { RELEVANT_RANK, searchKnowledge } from '../../src/domain/knowledge/search.js';
import { startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const passagesOf = async (documentId: string) =>
  (
    await sql<{ heading: string; content: string; language: string }>`
      select heading, content, language from knowledge_passages where document_id = ${documentId} order by language, ordinal
    `.execute(t.database.db)
  ).rows;

const statsOf = async (tenantId: string) =>
  (
    await sql<{ passages: number; terms: number }>`
      select coalesce((select sum(passages) from knowledge_stats where tenant_id = ${tenantId}), 0)::int as passages,
             (select count(*) from knowledge_terms where tenant_id = ${tenantId} and passages > 0)::int as terms
    `.execute(t.database.db)
  ).rows[0];

const MANUAL = [
  'Welcome to the printer manual.',
  '# Setting up',
  'Unpack the printer and remove the orange tape.',
  '## Wi-Fi',
  'Hold the Wi-Fi button for five seconds until the light blinks blue.',
  '# Troubleshooting',
  'A paper jam clears when you open the rear tray and pull the sheet gently.',
].join('\n\n');

describe('passages', () => {
  it('are the sections of a document under their heading path, and follow every change to it', async () => {
    const { tenantId } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, { title: 'Printer manual', content: MANUAL });
    expect(await passagesOf(doc.id)).toEqual([
      { heading: '', content: 'Welcome to the printer manual.', language: 'en' },
      { heading: 'Setting up', content: 'Unpack the printer and remove the orange tape.', language: 'en' },
      {
        heading: 'Setting up > Wi-Fi',
        content: 'Hold the Wi-Fi button for five seconds until the light blinks blue.',
        language: 'en',
      },
      {
        heading: 'Troubleshooting',
        content: 'A paper jam clears when you open the rear tray and pull the sheet gently.',
        language: 'en',
      },
    ]);
    expect(await statsOf(tenantId)).toMatchObject({ passages: 4 });

    await t.services.documents.addTranslation(tenantId, doc.id, {
      language: 'fr',
      title: "Manuel de l'imprimante",
      content: '# Dépannage\n\nUn bourrage papier se dégage en ouvrant le bac arrière.',
    });
    expect((await passagesOf(doc.id)).filter((p) => p.language === 'fr')).toEqual([
      { heading: 'Dépannage', content: 'Un bourrage papier se dégage en ouvrant le bac arrière.', language: 'fr' },
    ]);
    expect(await statsOf(tenantId)).toMatchObject({ passages: 5 });

    // A long paragraph is cut at sentence ends, each piece a passage of its own.
    const long = Array.from({ length: 40 }, (_, i) => `Sentence number ${i} says something about toner.`).join(' ');
    const longDoc = await t.services.documents.create(tenantId, { title: 'Toner', content: long });
    const pieces = await passagesOf(longDoc.id);
    expect(pieces.length).toBeGreaterThan(2);
    expect(pieces.every((p) => p.content.length <= 700 && /\.$/.test(p.content))).toBe(true);
    expect(pieces.map((p) => p.content).join(' ')).toBe(long);

    await t.services.documents.delete(tenantId, doc.id);
    await t.services.documents.delete(tenantId, longDoc.id);
    expect(await passagesOf(doc.id)).toEqual([]);
    // The word statistics follow: nothing is left counted.
    expect(await statsOf(tenantId)).toEqual({ passages: 0, terms: 0 });
  });

  it("count each tenant's words apart: another tenant's documents never change a tenant's ranks", async () => {
    const a = await t.tenant();
    const b = await t.tenant();
    await t.services.documents.create(a.tenantId, { title: 'Printer manual', content: MANUAL });
    const before = await searchKnowledge(t.database.db, a.tenantId, 'How do I clear a paper jam?');
    for (let i = 0; i < 5; i++) {
      await t.services.documents.create(b.tenantId, { title: `Jam ${i}`, content: 'Paper jam paper jam paper jam.' });
    }
    const after = await searchKnowledge(t.database.db, a.tenantId, 'How do I clear a paper jam?');
    expect(after).toEqual(before);
    expect(await searchKnowledge(t.database.db, b.tenantId, 'orange tape Wi-Fi button')).toEqual([]);
  });
});

describe('ranking', () => {
  it('quotes the passage that answers, above the threshold; declines what the knowledge does not cover', async () => {
    const { tenantId } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, { title: 'Printer manual', content: MANUAL });
    await t.services.documents.create(tenantId, {
      title: 'Paper',
      content: 'We sell paper in packs of 500 sheets. Paper is recycled.',
    });
    const [best] = await searchKnowledge(t.database.db, tenantId, 'How do I connect the printer to Wi-Fi?');
    expect(best).toMatchObject({ document_id: doc.id, heading: 'Setting up > Wi-Fi' });
    expect(best?.rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
    const jam = await searchKnowledge(t.database.db, tenantId, 'My paper is jammed, what should I do?');
    expect(jam[0]).toMatchObject({ document_id: doc.id, heading: 'Troubleshooting' });

    // Words the knowledge never uses weigh most: a question about something else ranks below the
    // threshold though it shares a word ("paper") with the knowledge.
    const offTopic = await searchKnowledge(
      t.database.db,
      tenantId,
      'Can I recycle newspaper and cardboard boxes at the office?',
    );
    expect(offTopic.every((p) => p.rank < RELEVANT_RANK)).toBe(true);
    expect(await searchKnowledge(t.database.db, tenantId, 'What is the capital of Australia?')).toEqual([]);
  });

  it('declines a question that shares a single word with a passage, however rare the word', async () => {
    const { tenantId } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, {
      title: 'Shipping labels',
      content:
        'Print the shipping label. Stick it flat: labels stick best on the largest side, and they stick to cardboard.',
    });
    await t.services.documents.create(tenantId, {
      title: 'Returns',
      content: 'Returns are free within 30 days of delivery.',
    });
    const onTopic = await searchKnowledge(t.database.db, tenantId, 'Where do I stick the label on my box?');
    expect(onTopic[0]).toMatchObject({ document_id: doc.id });
    expect(onTopic[0]?.rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
    // "stick" is the rarest word the knowledge has, and the passage says it three times, but it
    // is one word of the question's three: the threshold alone would answer.
    const offTopic = await searchKnowledge(t.database.db, tenantId, 'Why does cooked rice stick?');
    expect(offTopic.map((p) => p.document_id)).toEqual([doc.id]);
    expect(offTopic[0]?.rank).toBe(0);
  });

  it('reads a German compound the knowledge never uses whole as the two words it does use', async () => {
    const { tenantId } = await t.tenant();
    const doc = await t.services.documents.create(tenantId, {
      title: 'Netzwerk',
      content: 'Die Protokolle des Netzwerks stehen in der Datei /etc/protocols.',
      language: 'de',
    });
    await t.services.documents.create(tenantId, {
      title: 'Drucker',
      content: 'Der Drucker steht im Flur.',
      language: 'de',
    });
    const [best] = await searchKnowledge(t.database.db, tenantId, 'Wo finde ich die Netzwerkprotokolle?', {
      language: 'de',
    });
    expect(best).toMatchObject({ document_id: doc.id });
    expect(best?.rank).toBeGreaterThanOrEqual(RELEVANT_RANK);
    // Halves the knowledge does not hold are not cut out of a word: nothing is found.
    expect(await searchKnowledge(t.database.db, tenantId, 'Wo ist die Kaffeemaschine?', { language: 'de' })).toEqual(
      [],
    );
  });

  it('gives no weight to the numbers, addresses and personal-data placeholders of a question', async () => {
    const { tenantId } = await t.tenant();
    await t.services.documents.create(tenantId, {
      title: 'Refunds',
      content: 'Refunds are paid back to your card within 14 days.',
    });
    const plain = await searchKnowledge(t.database.db, tenantId, 'When is my refund paid?');
    const noisy = await searchKnowledge(
      t.database.db,
      tenantId,
      'When is my refund paid? #99182736 ann@example.com +33 6 12 34 56 78',
    );
    expect(noisy[0]?.rank).toBe(plain[0]?.rank);
    // Nor do the placeholders a replayed conversation has in their place.
    const replayed = await searchKnowledge(
      t.database.db,
      tenantId,
      'When is my refund paid? [email] [card_number] [phone]',
    );
    expect(replayed[0]?.rank).toBe(plain[0]?.rank);
  });
});

describe('answers', () => {
  it('are the part of the passage that answers, not the passage', () => {
    const passage = [
      '-a, --all: do not ignore entries starting with .',
      '-l: use a long listing format',
      '-t: sort by time, newest first',
    ].join('\n\n');
    expect(answerSentences('How do I sort by time?', passage)).toBe('-t: sort by time, newest first');
    // Short parts gather the one after them; a question sharing no word gets the passage's opening.
    expect(answerSentences('Show all entries', passage)).toBe(
      '-a, --all: do not ignore entries starting with .\n\n-l: use a long listing format\n\n-t: sort by time, newest first',
    );
    expect(answerSentences('Qué hora es', 'Primera frase del texto.')).toBe('Primera frase del texto.');
  });
});

describe('on real text: the tuning corpus of the answer benchmark', () => {
  // English and German of bench/answers (Debian's manual pages of GNU coreutils; `npm run
  // bench:answers` runs both corpora in four languages through the API).
  for (const language of ['en', 'de']) {
    it(`puts the right article first more often than BM25 does, and declines off-topic questions (${language})`, async () => {
      const { tenantId } = await t.tenant();
      const documents = loadCorpus('files', language);
      const slugOf = new Map<string, string>();
      for (const doc of documents) {
        const made = await t.services.documents.create(tenantId, { title: doc.title, content: doc.content, language });
        slugOf.set(made.id, doc.slug);
      }
      const set = loadQuestions('files');
      const bm25 = new MiniSearch<{ slug: string; title: string; content: string }>({
        idField: 'slug',
        fields: ['title', 'content'],
      });
      bm25.addAll(documents);
      let ours = 0;
      let theirs = 0;
      for (const question of set.questions) {
        const text = question.q[language] as string;
        const [first] = await searchKnowledge(t.database.db, tenantId, text, { language });
        if (first && first.rank >= RELEVANT_RANK && slugOf.get(first.document_id) === question.slug) ours++;
        if (bm25.search(text)[0]?.id === question.slug) theirs++;
      }
      expect(ours).toBeGreaterThan(theirs);
      let answered = 0;
      for (const question of set.off_topic) {
        const [first] = await searchKnowledge(t.database.db, tenantId, question.q[language] as string, { language });
        if (first && first.rank >= RELEVANT_RANK) answered++;
      }
      expect(answered).toBeLessThanOrEqual(set.off_topic.length * 0.2);
    }, 240_000);
  }
});
