// The answer benchmark: `npm run bench:answers`. For each corpus (`files`, tuned on; `system`, held
// out) and language (en, fr, de, es), the agent on a new workspace and MiniSearch's BM25 on the same
// articles answer the corpus's questions in the same run; the table goes to standard output.
//   npm run bench:answers                         # PGlite, every corpus and language
//   BENCH_CORPORA=files BENCH_LANGUAGES=en,fr npm run bench:answers
//   DATABASE_URL=postgres://… npm run bench:answers
//   npm run bench:answers -- --calibrate           # the relevance threshold, from the tuning corpus
//   EMBEDDINGS_BASE_URL=… EMBEDDINGS_MODEL=… npm run bench:answers -- --calibrate   # and EMBEDDINGS_MIN_SIMILARITY
import { RELEVANT_RANK } from '../../src/domain/knowledge/search.js';
import { withBenchDatabase } from '../support.js';
import {
  agentScores,
  bm25Scores,
  loadCorpus,
  loadQuestions,
  type OffTopicScore,
  offTopicRanks,
  offTopicSimilarities,
  type Scores,
} from './evaluate.js';

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

/** Off-topic questions the agent may answer at most: 2 in 10. */
const OFF_TOPIC_ANSWERED = 0.2;

/** The lowest threshold, to the thousandth, above all but the `allowed` highest of `values`. */
const thresholdAbove = (values: number[], allowed: number) =>
  Math.ceil(((values.sort((a, b) => b - a)[allowed] ?? 0) + 1e-6) * 1000) / 1000;

/** The embeddings settings of the environment, when a model is configured. */
function embeddingsEnv(): Record<string, string> | undefined {
  const names = ['EMBEDDINGS_BASE_URL', 'EMBEDDINGS_MODEL', 'EMBEDDINGS_API_KEY', 'EMBEDDINGS_TIMEOUT_MS'];
  const env = Object.fromEntries(names.flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : [])));
  return env.EMBEDDINGS_BASE_URL && env.EMBEDDINGS_MODEL ? env : undefined;
}

/**
 * EMBEDDINGS_MIN_SIMILARITY (src/domain/knowledge/fused-search.ts): the lowest similarity that
 * leaves at most 2 in 10 off-topic questions answered on the fused rank, that is those the lexical
 * rank answers (at `relevantRank`, the service's RELEVANT_RANK) and those whose closest passage
 * is at least that similar.
 */
function minSimilarity(scores: OffTopicScore[], allowed: number, relevantRank: number) {
  const lexical = scores.filter((s) => s.rank >= relevantRank).length;
  const others = scores.filter((s) => s.rank < relevantRank).map((s) => s.similarity);
  const similarities = scores.map((s) => s.similarity).sort((a, b) => b - a);
  console.log(`off-topic similarities, highest first: ${similarities.map((s) => s.toFixed(3)).join(' ')}`);
  if (lexical > allowed) console.log(`the lexical rank alone answers ${lexical}: calibrate RELEVANT_RANK first`);
  const fused = thresholdAbove(others, Math.max(allowed - lexical, 0));
  console.log(
    `EMBEDDINGS_MIN_SIMILARITY = ${fused} (with RELEVANT_RANK = ${relevantRank}, answering ${lexical} lexically; ` +
      `${thresholdAbove(similarities, allowed)} by similarity alone)`,
  );
}

/**
 * The relevance threshold: the lowest rank that leaves at most 2 in 10 of the tuning corpus's
 * off-topic questions answered, in every language together (src/domain/knowledge/search.ts); with
 * an embeddings model configured, EMBEDDINGS_MIN_SIMILARITY by the same rule.
 */
async function calibrate() {
  await withBenchDatabase('bench_answers', async (database) => {
    const set = loadQuestions('files');
    const ranks: number[] = [];
    for (const language of LANGUAGES)
      ranks.push(...(await offTopicRanks(database, loadCorpus('files', language), set, language)));
    ranks.sort((a, b) => b - a);
    const allowed = Math.floor(ranks.length * OFF_TOPIC_ANSWERED);
    const threshold = thresholdAbove(ranks, allowed);
    console.log(`off-topic ranks, highest first: ${ranks.map((r) => r.toFixed(3)).join(' ')}`);
    console.log(`RELEVANT_RANK = ${threshold} (answers ${allowed} of ${ranks.length} off-topic questions at most)`);
    const env = embeddingsEnv();
    if (!env) return;
    const scores: OffTopicScore[] = [];
    for (const language of LANGUAGES)
      scores.push(...(await offTopicSimilarities(database, loadCorpus('files', language), set, language, env)));
    // Against the threshold the service uses, which may stand above the one just printed (docs/knowledge.md).
    minSimilarity(scores, allowed, RELEVANT_RANK);
  });
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

await (process.argv.includes('--calibrate') ? calibrate() : main());
