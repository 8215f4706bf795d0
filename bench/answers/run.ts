// The answer benchmark: `npm run bench:answers`. For each corpus (`files`, tuned on; `system`, held
// out) and language (en, fr, de, es), the agent on a new workspace and MiniSearch's BM25 on the same
// articles answer the corpus's questions in the same run; the table goes to standard output.
//   npm run bench:answers                         # PGlite, every corpus and language
//   BENCH_CORPORA=files BENCH_LANGUAGES=en,fr npm run bench:answers
//   DATABASE_URL=postgres://… npm run bench:answers
import { withBenchDatabase } from '../support.js';
import { agentScores, bm25Scores, loadCorpus, loadQuestions, type Scores } from './evaluate.js';

const CORPORA = (process.env.BENCH_CORPORA ?? 'files,system').split(',');
const LANGUAGES = (process.env.BENCH_LANGUAGES ?? 'en,fr,de,es').split(',');

const pct = (n: number, of: number) => (of === 0 ? '–' : `${n}/${of} (${Math.round((100 * n) / of)} %)`);

function line(corpus: string, language: string, who: string, s: Scores): string {
  const agentOnly = (value: string | undefined) => value ?? '–';
  return [
    corpus,
    language,
    who,
    pct(s.hit1, s.questions),
    pct(s.hit3, s.questions),
    s.mrr.toFixed(2),
    agentOnly(s.facts === undefined ? undefined : pct(s.facts, s.questions)),
    agentOnly(s.offTopic === undefined ? undefined : pct(s.offTopicAnswered ?? 0, s.offTopic)),
    agentOnly(s.medianLength === undefined ? undefined : String(s.medianLength)),
  ].join(' | ');
}

async function main() {
  console.log(
    '| corpus | language | system | hit@1 | hit@3 | MRR | states the fact | off-topic answered | median answer (chars) |',
  );
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  await withBenchDatabase('bench_answers', async (database) => {
    for (const corpus of CORPORA) {
      const set = loadQuestions(corpus);
      for (const language of LANGUAGES) {
        const documents = loadCorpus(corpus, language);
        const agent = await agentScores(database, documents, set, language);
        console.log(`| ${line(corpus, language, 'agent', agent)} |`);
        console.log(`| ${line(corpus, language, 'BM25 (MiniSearch)', bm25Scores(documents, set, language))} |`);
      }
    }
  });
}

await main();
