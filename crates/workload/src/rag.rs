//! RAG: a query passes through timed stages before generation — embed the query (a real
//! sentence encoder), retrieve the top-k chunks from an in-memory vector index over a
//! generated corpus, rerank them, assemble the prompt from the kept chunks — then the model
//! generates. Each stage is stamped, giving the seeds' timeline
//! (embed / retrieve / rerank / assemble / queue / prefill / decode).
//!
//! The corpus is synthetic text over a fixed vocabulary of topics, so retrieval is meaningful
//! (a query is drawn from one chunk's words) and the run is reproducible from its seed.
//! Reranking re-scores the retrieved chunks by cosine similarity plus word overlap with the
//! query: no cross-encoder is available offline, and the stage's cost is what is measured.
//!
//! Without a sentence encoder, the embed stage is the serving engine's own prefill-only pass
//! over the query (one request of one output token, through the same target, so it competes
//! with generation as a co-located embedder would), and the vectors come from
//! [`HashEmbedder`] (feature hashing of the words): the stage's cost is a real forward pass,
//! the retrieval still finds the right chunks.
//!
//! In a simulation the stages run outside virtual time; the twin times them once on this
//! machine ([`RagSetup::time_stages`]) and spends that time on the harness's virtual cores
//! ([`crate::harness`]), so that queries ready together reach the engine together, as they do.

use crate::drive::{send, Collector};
use crate::harness::HarnessWork;
use crate::level::{LevelRun, UnitPlan};
use crate::scenario::LengthDist;
use crate::users::{closed_loop, Users};
use goodput_core::{
    ClientRecord, Outcome, SamplingParams, Stamp, StepKind, Target, TaskRecord, TaskStep, TextCodec, TokenId,
    WorkRequest,
};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Text → normalised embedding vectors (the sentence encoder).
pub trait Embedder: Send + Sync + 'static {
    /// The error is the encoder's own, kept as the cause ([`goodput_core::CodecError`]).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, goodput_core::CodecError>;
}

/// Feature hashing of words into `dims` buckets (FNV-1a), L2-normalised: a bag-of-words
/// vector with no model, for retrieval when no sentence encoder is at hand.
pub struct HashEmbedder {
    pub dims: usize,
}

impl Embedder for HashEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, goodput_core::CodecError> {
        let dims = self.dims.max(1);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; dims];
                for w in t.split_whitespace() {
                    let h =
                        w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
                    v[(h % dims as u64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter_mut().for_each(|x| *x /= n);
                v
            })
            .collect())
    }
}

/// A RAG scenario: the synthetic corpus, the query, retrieval and the answer's length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rag {
    /// Chunks in the corpus.
    pub corpus_chunks: usize,
    /// Words per chunk.
    pub chunk_words: usize,
    /// Words per query.
    pub query_words: usize,
    /// Chunks retrieved by vector search.
    pub top_k: usize,
    /// Chunks kept after reranking, put in the prompt.
    pub keep: usize,
    pub output: LengthDist,
}

const TOPICS: [&str; 12] = [
    "invoice",
    "contract",
    "server",
    "network",
    "payroll",
    "warehouse",
    "shipment",
    "patient",
    "policy",
    "turbine",
    "satellite",
    "vaccine",
];
const WORDS: [&str; 40] = [
    "the",
    "quarterly",
    "report",
    "shows",
    "delay",
    "approval",
    "customer",
    "region",
    "budget",
    "update",
    "status",
    "failure",
    "backup",
    "schedule",
    "supplier",
    "review",
    "audit",
    "risk",
    "incident",
    "team",
    "deadline",
    "cost",
    "latency",
    "capacity",
    "request",
    "change",
    "manager",
    "system",
    "record",
    "error",
    "version",
    "release",
    "ticket",
    "owner",
    "claim",
    "limit",
    "access",
    "storage",
    "priority",
    "summary",
];

impl Rag {
    /// The built-in `rag`: 400 chunks of 40 words, top-8 retrieved, 3 kept.
    pub fn builtin() -> Self {
        Rag {
            corpus_chunks: 400,
            chunk_words: 40,
            query_words: 12,
            top_k: 8,
            keep: 3,
            output: LengthDist::Uniform { min: 50, max: 100 },
        }
    }

    /// Whether the corpus and retrieval settings make sense.
    pub fn validate(&self) -> Result<(), crate::WorkloadError> {
        Ok(self.check()?)
    }

    fn check(&self) -> Result<(), crate::Invalid> {
        let bad = |problem: String| Err(crate::Invalid::new("rag", problem));
        if self.corpus_chunks == 0 || self.chunk_words == 0 || self.query_words == 0 {
            return bad("corpus_chunks, chunk_words and query_words must be positive".into());
        }
        if self.corpus_chunks > 1_000_000 || self.chunk_words > 100_000 || self.query_words > 100_000 {
            return bad(format!(
                "at most 1000000 corpus_chunks of at most 100000 chunk_words and 100000 query_words \
                 (got {} chunks of {} words, queries of {})",
                self.corpus_chunks, self.chunk_words, self.query_words
            ));
        }
        if self.keep == 0 || self.keep > self.top_k || self.top_k > self.corpus_chunks {
            return bad("needs 1 ≤ keep ≤ top_k ≤ corpus_chunks".into());
        }
        self.output.validate("rag output")
    }

    pub fn describe(&self) -> String {
        format!(
            "rag: corpus {} chunks of {} words, query {} words, top-{} retrieved, {} kept, output {} tokens",
            self.corpus_chunks,
            self.chunk_words,
            self.query_words,
            self.top_k,
            self.keep,
            self.output.describe()
        )
    }

    fn chunk_text(&self, rng: &mut impl Rng) -> String {
        let topic = TOPICS[rng.random_range(0..TOPICS.len())];
        let mut w = Vec::with_capacity(self.chunk_words);
        for i in 0..self.chunk_words {
            w.push(if i % 5 == 0 { topic } else { WORDS[rng.random_range(0..WORDS.len())] });
        }
        w.join(" ")
    }
}

/// The corpus and its vectors.
pub struct RagIndex {
    pub chunks: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

impl RagIndex {
    /// Generates the corpus from `seed` and embeds every chunk.
    pub fn build(rag: &Rag, embedder: &dyn Embedder, seed: u64) -> Result<Self, crate::WorkloadError> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0xC0FFEE);
        let chunks: Vec<String> = (0..rag.corpus_chunks).map(|_| rag.chunk_text(&mut rng)).collect();
        let mut vectors = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(32) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            vectors.extend(embedder.embed(&refs).map_err(crate::WorkloadError::Embed)?);
        }
        Ok(Self { chunks, vectors })
    }

    /// Indices of the `k` chunks most similar to `q` (cosine; vectors are normalised).
    pub fn search(&self, q: &[f32], k: usize) -> Vec<(usize, f32)> {
        let mut scored: Vec<(usize, f32)> =
            self.vectors.iter().enumerate().map(|(i, v)| (i, v.iter().zip(q).map(|(a, b)| a * b).sum())).collect();
        let k = k.min(scored.len());
        if k == 0 {
            return Vec::new();
        }
        scored.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
    }
}

fn rerank(index: &RagIndex, query: &str, hits: &[(usize, f32)], keep: usize) -> Vec<usize> {
    let qw: HashSet<&str> = query.split_whitespace().collect();
    let mut scored: Vec<(usize, f32)> = hits
        .iter()
        .map(|&(i, cos)| {
            let cw: HashSet<&str> = index.chunks[i].split_whitespace().collect();
            let overlap = qw.intersection(&cw).count() as f32 / qw.len().max(1) as f32;
            (i, cos + 0.5 * overlap)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.into_iter().take(keep).map(|(i, _)| i).collect()
}

/// Everything a RAG run needs besides the target.
pub struct RagSetup {
    /// The scenario.
    pub rag: Rag,
    /// Its corpus, embedded.
    pub index: RagIndex,
    /// Embeds each query (the same embedder as the corpus's).
    pub embedder: Arc<dyn Embedder>,
    /// Turns the assembled prompt (and, without an encoder, the query) into token ids.
    pub tokenizer: Arc<dyn TextCodec>,
    /// The sentence encoder's directory; `None`: no encoder, the embed stage is a
    /// prefill-only pass of the query through the target (and `embedder` is a
    /// [`HashEmbedder`]).
    pub encoder: Option<PathBuf>,
    /// In a simulation, the harness's CPU time of each stage before the model call
    /// ([`RagSetup::time_stages`]), spent on the harness's virtual cores; `None` in a
    /// measured run, where the stages take their own time.
    pub harness: Option<HarnessWork<StepKind>>,
}

impl RagSetup {
    /// Generates the corpus of `rag` from `seed` and embeds it with `embedder`; `encoder` as
    /// in [`RagSetup::encoder`].
    pub fn build(
        rag: Rag,
        embedder: Arc<dyn Embedder>,
        tokenizer: Arc<dyn TextCodec>,
        encoder: Option<PathBuf>,
        seed: u64,
    ) -> Result<Self, crate::WorkloadError> {
        let index = RagIndex::build(&rag, embedder.as_ref(), seed)?;
        Ok(Self { rag, index, embedder, tokenizer, encoder, harness: None })
    }

    /// The query of request `id` of a level seeded `seed`, and its output length. The query is
    /// drawn from one chunk's words, so the right chunk exists.
    fn draw(&self, seed: u64, id: u64) -> (String, usize) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let chunks = &self.index.chunks;
        let words: Vec<&str> = chunks[rng.random_range(0..chunks.len())].split_whitespace().collect();
        let query: Vec<&str> = (0..self.rag.query_words).map(|_| words[rng.random_range(0..words.len())]).collect();
        (query.join(" "), self.rag.output.sample(&mut rng))
    }

    /// The prompt: the kept chunks, then the question.
    fn assemble(&self, query: &str, kept: &[usize]) -> Result<Vec<TokenId>, String> {
        let mut text = String::from("Answer the question from the context.\nContext:\n");
        for (n, &i) in kept.iter().enumerate() {
            text.push_str(&format!("[{}] {}\n", n + 1, self.index.chunks[i]));
        }
        text.push_str(&format!("Question: {query}\nAnswer:"));
        self.tokenizer.encode(&text).map_err(|e| format!("assembling the prompt: {e}"))
    }

    /// The harness's stages of a query before its model call — embed (the encoder's pass; the
    /// hashed vector without one, whose engine pass a simulation runs itself), retrieve,
    /// rerank, assemble — run here on `n` queries drawn from `seed` after [`UNTIMED`] untimed: each
    /// stage's median time. What a simulation spends of the harness core ([`Self::harness`]).
    pub fn time_stages(&self, seed: u64, n: usize) -> Result<Vec<(StepKind, Duration)>, String> {
        let mut times: [Vec<Duration>; 4] = Default::default();
        for id in 0..n as u64 + UNTIMED {
            let (query, _) = self.draw(seed, id);
            let t = Instant::now();
            let v = self.embedder.embed(&[query.as_str()]).map_err(|e| format!("embedding: {e}"))?;
            let qv = v.into_iter().next().ok_or("the embedder returned no vector")?;
            let t1 = Instant::now();
            let hits = self.index.search(&qv, self.rag.top_k);
            let t2 = Instant::now();
            let kept = rerank(&self.index, &query, &hits, self.rag.keep);
            let t3 = Instant::now();
            self.assemble(&query, &kept)?;
            if id >= UNTIMED {
                for (i, d) in [t1 - t, t2 - t1, t3 - t2, t3.elapsed()].into_iter().enumerate() {
                    times[i].push(d);
                }
            }
        }
        let kinds = [StepKind::Embed, StepKind::Retrieve, StepKind::Rerank, StepKind::Assemble];
        Ok(kinds
            .into_iter()
            .zip(times)
            .map(|(k, mut t)| {
                t.sort();
                (k, t.get(t.len() / 2).copied().unwrap_or_default())
            })
            .collect())
    }

    /// No sentence encoder: the embed stage is the target's own prefill-only pass.
    pub fn embed_by_prefill(&self) -> bool {
        self.encoder.is_none()
    }

    /// The encoder as results files name it: its directory, or
    /// `none: the engine's prefill-only pass`.
    pub fn describe_encoder(&self) -> String {
        self.encoder.as_ref().map_or("none: the engine's prefill-only pass".to_string(), |d| d.display().to_string())
    }
}

/// Queries [`RagSetup::time_stages`] runs before it times (the encoder's first passes warm its
/// caches and allocations).
pub const UNTIMED: u64 = 8;

/// Request ids of the prefill-only embedding passes: the query's id with this bit set.
pub const EMBED_ID_BIT: u64 = 1 << 62;

fn failed(id: u64, at: Stamp, why: String) -> ClientRecord {
    ClientRecord::unanswered(id, at, 0, at, Outcome::error(goodput_core::FailureKind::Other, why))
}

/// What every query of a level needs.
struct Queries<T> {
    target: Arc<T>,
    setup: Arc<RagSetup>,
    plan: UnitPlan,
    collector: Collector,
}

impl<T: Target> Queries<T> {
    /// Appends stage `kind`, from `start` to now, to `steps`; returns now. A simulation first
    /// spends the stage's harness time.
    async fn stamp(&self, kind: StepKind, start: Stamp, steps: &mut Vec<TaskStep>) -> Stamp {
        if let Some(h) = &self.setup.harness {
            h.spend(kind, &self.target.clock()).await;
        }
        let end = self.target.clock().now();
        steps.push(TaskStep { kind, start, end });
        end
    }

    /// The embed stage: the query's vector. Without an encoder, the engine's own forward pass
    /// over the query (request `id`, due at `t0`) stands in for the encoder's cost; the vector
    /// then comes from the hash embedder.
    async fn embed(&self, id: u64, query: &str, t0: Stamp) -> Result<Vec<f32>, String> {
        if self.setup.embed_by_prefill() {
            let prompt = self.setup.tokenizer.encode(query).map_err(|e| format!("embedding pass: {e}"))?;
            let req =
                WorkRequest { session: None, id: id | EMBED_ID_BIT, prompt, params: SamplingParams::greedy_exact(1) };
            match send(&*self.target, req, t0, self.plan.timeout, self.plan.retry).await.outcome {
                Outcome::Ok => {}
                other => return Err(format!("embedding pass: {other:?}")),
            }
        }
        let (setup, query) = (self.setup.clone(), query.to_string());
        // The query's failure is recorded as text (a record's failure message).
        match tokio::task::spawn_blocking(move || setup.embedder.embed(&[query.as_str()])).await {
            Ok(Ok(mut v)) => v.pop().ok_or_else(|| "the embedder returned no vector".to_string()),
            Ok(Err(e)) => Err(format!("embedding: {e}")),
            Err(e) => Err(format!("embedding: {e}")),
        }
    }

    /// Query number `q` of the level, through every stage; a failed embed ends it early.
    async fn query(self: Arc<Self>, q: u64) {
        let id = self.plan.first_id + q;
        let (query, n_out) = self.setup.draw(self.plan.seed, id);
        let t0 = self.target.clock().now();
        let mut steps = Vec::with_capacity(5);
        let embedded = self.embed(id, &query, t0).await;
        let t1 = self.stamp(StepKind::Embed, t0, &mut steps).await;
        let qv = match embedded {
            Ok(v) => v,
            Err(e) => {
                self.collector.push(failed(id, t0, format!("embedding failed: {e}")));
                self.collector.push_task(TaskRecord { task: id, start: t0, end: t1, steps, ok: false });
                return;
            }
        };
        let hits = self.setup.index.search(&qv, self.setup.rag.top_k);
        let t2 = self.stamp(StepKind::Retrieve, t1, &mut steps).await;
        let kept = rerank(&self.setup.index, &query, &hits, self.setup.rag.keep);
        let t3 = self.stamp(StepKind::Rerank, t2, &mut steps).await;
        let prompt = self.setup.assemble(&query, &kept);
        let t4 = self.stamp(StepKind::Assemble, t3, &mut steps).await;
        let rec = match prompt {
            Ok(prompt) => {
                let req = WorkRequest { session: None, id, prompt, params: SamplingParams::greedy_exact(n_out) };
                // Latency of the model call starts when the prompt was ready.
                send(&*self.target, req, t4, self.plan.timeout, self.plan.retry).await
            }
            Err(e) => failed(id, t4, e),
        };
        let ok = rec.is_ok();
        self.stamp(StepKind::Llm, t4, &mut steps).await;
        self.collector.push(rec);
        let end = self.target.clock().now();
        self.collector.push_task(TaskRecord { task: id, start: t0, end, steps, ok });
    }
}

/// Runs `warmup + units + cooldown` RAG queries over `users` closed-loop users. The model
/// calls are the records; each measured query's stages are a task.
pub async fn run_rag<T: Target>(target: Arc<T>, setup: Arc<RagSetup>, plan: UnitPlan) -> (LevelRun, Vec<TaskRecord>) {
    let clock = target.clock();
    let start = clock.now();
    let window = plan.window(1, start);
    let collector = Collector::new(window, false, &plan).closed(1);
    let users = Users::of(&plan, None);
    let queries = Arc::new(Queries { target, setup, plan, collector });
    let q = queries.clone();
    let started = closed_loop(users, queries.clone(), move |w| q.collector.warmed(w), Queries::query).await;
    let (mut run, mut tasks) = queries.collector.finish(start, clock.now(), |_| window);
    run.ramp = Some(started.ramp);
    tasks.retain(|t| (run.window.from_id..run.window.to_id).contains(&t.task));
    (run, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bag-of-words embedding over the fixed vocabulary: enough to test search and rerank.
    struct Bow;
    impl Embedder for Bow {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, goodput_core::CodecError> {
            let vocab: Vec<&str> = TOPICS.iter().chain(WORDS.iter()).copied().collect();
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; vocab.len()];
                    for w in t.split_whitespace() {
                        if let Some(i) = vocab.iter().position(|x| *x == w) {
                            v[i] += 1.0;
                        }
                    }
                    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                    v.iter().map(|x| x / n).collect()
                })
                .collect())
        }
    }

    #[test]
    fn hash_embedder_is_normalised_and_finds_the_source_chunk() {
        let rag = Rag { corpus_chunks: 40, ..Rag::builtin() };
        let e = HashEmbedder { dims: 256 };
        let index = RagIndex::build(&rag, &e, 3).unwrap();
        for i in [0, 13, 39] {
            let q = index.chunks[i].clone();
            let v = e.embed(&[&q]).unwrap().pop().unwrap();
            assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
            assert_eq!(index.search(&v, 1)[0].0, i);
        }
        assert_eq!(e.embed(&[""]).unwrap()[0].len(), 256);
    }

    #[test]
    fn search_finds_the_source_chunk_and_rerank_keeps_k() {
        let rag = Rag { corpus_chunks: 50, ..Rag::builtin() };
        rag.validate().unwrap();
        let index = RagIndex::build(&rag, &Bow, 1).unwrap();
        assert_eq!(index.chunks.len(), 50);
        let q = index.chunks[17].clone();
        let qv = Bow.embed(&[&q]).unwrap().pop().unwrap();
        let hits = index.search(&qv, 8);
        assert_eq!(hits.len(), 8);
        assert_eq!(hits[0].0, 17, "a chunk is its own nearest neighbour");
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        let kept = rerank(&index, &q, &hits, 4);
        assert_eq!(kept.len(), 4);
        assert_eq!(kept[0], 17);
        assert!(Rag { keep: 9, ..Rag::builtin() }.validate().is_err());
    }
}
