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

use crate::runner::{send, LevelRun, UnitPlan};
use crate::scenario::LengthDist;
use goodput_core::{ClientRecord, Outcome, SamplingParams, Target, TaskRecord, TaskStep, TokenId, WorkRequest};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Text → normalised embedding vectors (the sentence encoder).
pub trait Embedder: Send + Sync + 'static {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// Feature hashing of words into `dims` buckets (FNV-1a), L2-normalised: a bag-of-words
/// vector with no model, for retrieval when no sentence encoder is at hand.
pub struct HashEmbedder {
    pub dims: usize,
}

impl Embedder for HashEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
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

/// Text → the model's token ids (to assemble the prompt).
pub trait TextTokenizer: Send + Sync + 'static {
    fn encode(&self, text: &str) -> Result<Vec<TokenId>, String>;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

    pub fn validate(&self) -> Result<(), String> {
        if self.corpus_chunks == 0 || self.chunk_words == 0 || self.query_words == 0 {
            return Err("rag: corpus_chunks, chunk_words and query_words must be positive".into());
        }
        if self.keep == 0 || self.keep > self.top_k || self.top_k > self.corpus_chunks {
            return Err("rag: needs 1 ≤ keep ≤ top_k ≤ corpus_chunks".into());
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
    pub fn build(rag: &Rag, embedder: &dyn Embedder, seed: u64) -> Result<Self, String> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0xC0FFEE);
        let chunks: Vec<String> = (0..rag.corpus_chunks).map(|_| rag.chunk_text(&mut rng)).collect();
        let mut vectors = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(32) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            vectors.extend(embedder.embed(&refs)?);
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
    pub rag: Rag,
    pub index: RagIndex,
    pub embedder: Arc<dyn Embedder>,
    pub tokenizer: Arc<dyn TextTokenizer>,
    /// No sentence encoder: the embed stage is a prefill-only pass of the query through the
    /// target (and `embedder` is a [`HashEmbedder`]).
    pub embed_by_prefill: bool,
}

/// Request ids of the prefill-only embedding passes: the query's id with this bit set.
pub const EMBED_ID_BIT: u64 = 1 << 62;

fn failed(id: u64, at: goodput_core::Stamp, why: String) -> ClientRecord {
    ClientRecord::unanswered(id, at, 0, at, Outcome::Error(why))
}

/// Runs `warmup + queries` RAG queries over `users` closed-loop users. The model calls are
/// the records; each query's stages are a task.
pub async fn run_rag<T: Target>(target: Arc<T>, setup: Arc<RagSetup>, plan: UnitPlan) -> (LevelRun, Vec<TaskRecord>) {
    let clock = target.clock();
    let total = (plan.warmup + plan.units + plan.cooldown) as u64;
    let records = Arc::new(Mutex::new(Vec::new()));
    let tasks_out = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(AtomicU64::new(0));
    let start = clock.now();
    let plan = Arc::new(plan);
    let mut handles = Vec::new();
    for _ in 0..plan.users.max(1) {
        let (target, setup, plan, next, records, tasks_out) =
            (target.clone(), setup.clone(), plan.clone(), next.clone(), records.clone(), tasks_out.clone());
        handles.push(tokio::spawn(async move {
            loop {
                let q = next.fetch_add(1, Ordering::Relaxed);
                if q >= total {
                    break;
                }
                let id = plan.first_id + q;
                let mut rng = rand::rngs::SmallRng::seed_from_u64(plan.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                // The query is drawn from one chunk's words, so the right chunk exists.
                let src = &setup.index.chunks[rng.random_range(0..setup.index.chunks.len())];
                let words: Vec<&str> = src.split_whitespace().collect();
                let query: String = (0..setup.rag.query_words)
                    .map(|_| words[rng.random_range(0..words.len())])
                    .collect::<Vec<_>>()
                    .join(" ");
                let n_out = setup.rag.output.sample(&mut rng);
                let t0 = target.clock().now();
                let mut steps = Vec::with_capacity(5);
                let stamp = |kind: &str, s: goodput_core::Stamp, steps: &mut Vec<TaskStep>| {
                    let e = target.clock().now();
                    steps.push(TaskStep { kind: kind.into(), start: s, end: e });
                    e
                };
                // Without an encoder, the engine's own forward pass over the query stands in
                // for the encoder's cost; the vector then comes from the hash embedder.
                let pass: Result<(), String> = if setup.embed_by_prefill {
                    match setup.tokenizer.encode(&query) {
                        Ok(prompt) => {
                            let req =
                                WorkRequest { id: id | EMBED_ID_BIT, prompt, params: SamplingParams::greedy_exact(1) };
                            match send(&*target, req, t0, plan.timeout, plan.retry).await.outcome {
                                Outcome::Ok => Ok(()),
                                other => Err(format!("embedding pass: {other:?}")),
                            }
                        }
                        Err(e) => Err(format!("embedding pass: {e}")),
                    }
                } else {
                    Ok(())
                };
                let embedded = match pass {
                    Ok(()) => {
                        let (setup2, query2) = (setup.clone(), query.clone());
                        tokio::task::spawn_blocking(move || setup2.embedder.embed(&[query2.as_str()]))
                            .await
                            .map_err(|e| e.to_string())
                            .and_then(|r| r)
                            .and_then(|mut v| v.pop().ok_or_else(|| "the embedder returned no vector".to_string()))
                    }
                    Err(e) => Err(e),
                };
                let t1 = stamp("embed", t0, &mut steps);
                let qv = match embedded {
                    Ok(v) => v,
                    Err(e) => {
                        records.lock().expect("lock").push(failed(id, t0, format!("embedding failed: {e}")));
                        tasks_out.lock().expect("lock").push(TaskRecord {
                            task: id,
                            start: t0,
                            end: t1,
                            steps,
                            ok: false,
                        });
                        continue;
                    }
                };
                let hits = setup.index.search(&qv, setup.rag.top_k);
                let t2 = stamp("retrieve", t1, &mut steps);
                let kept = rerank(&setup.index, &query, &hits, setup.rag.keep);
                let t3 = stamp("rerank", t2, &mut steps);
                let mut text = String::from("Answer the question from the context.\nContext:\n");
                for (n, &i) in kept.iter().enumerate() {
                    text.push_str(&format!("[{}] {}\n", n + 1, setup.index.chunks[i]));
                }
                text.push_str(&format!("Question: {query}\nAnswer:"));
                let prompt = setup.tokenizer.encode(&text);
                let t4 = stamp("assemble", t3, &mut steps);
                let rec = match prompt {
                    Ok(prompt) => {
                        let req = WorkRequest { id, prompt, params: SamplingParams::greedy_exact(n_out) };
                        // Latency of the model call starts when the prompt was ready.
                        send(&*target, req, t4, plan.timeout, plan.retry).await
                    }
                    Err(e) => failed(id, t4, format!("assembling the prompt: {e}")),
                };
                let ok = rec.is_ok();
                stamp("llm", t4, &mut steps);
                records.lock().expect("lock").push(rec);
                tasks_out.lock().expect("lock").push(TaskRecord {
                    task: id,
                    start: t0,
                    end: target.clock().now(),
                    steps,
                    ok,
                });
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    let end = clock.now();
    let records = std::mem::take(&mut *records.lock().expect("lock"));
    let mut tasks = std::mem::take(&mut *tasks_out.lock().expect("lock"));
    let run = LevelRun::of_units(records, &plan, 1, start, end);
    tasks.retain(|t| (run.window.from_id..run.window.to_id).contains(&t.task));
    (run, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bag-of-words embedding over the fixed vocabulary: enough to test search and rerank.
    struct Bow;
    impl Embedder for Bow {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
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
