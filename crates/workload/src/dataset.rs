//! Prompts from a dataset file instead of synthetic lengths: ShareGPT (a JSON array of
//! `{"conversations": [{"from": "human"|"gpt", "value": …}, …]}`) or JSONL (one object per
//! line: `prompt` or `messages`, optional `output_tokens`). Each conversation is read as its
//! user turns and the lengths of the replies; lengths are measured with the model's tokenizer.
//!
//! Single requests take each conversation's first user turn, with the reply's length as the
//! output length (or `output_tokens`, or a fixed override), as vLLM's ShareGPT dataset does;
//! as sessions, every turn is sent with the history before it (the target's own answers).

use crate::drive::{send, Collector};
use crate::level::{LevelRun, UnitPlan};
use crate::prompts::Prompts;
use crate::users::{closed_loop, Users};
use crate::WorkloadError;
use goodput_core::{input, SamplingParams, Target, TextCodec, TokenId, WorkRequest};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// The layout of a dataset file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    Sharegpt,
    Jsonl,
    /// JSONL when the file's first non-blank character is `{`, else ShareGPT.
    #[default]
    Auto,
}

impl std::str::FromStr for DatasetFormat {
    type Err = goodput_core::ValueError;

    /// `sharegpt`, `jsonl` or `auto`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sharegpt" => Ok(DatasetFormat::Sharegpt),
            "jsonl" => Ok(DatasetFormat::Jsonl),
            "auto" => Ok(DatasetFormat::Auto),
            _ => Err(goodput_core::ValueError::new(s, "a dataset is sharegpt, jsonl or auto")),
        }
    }
}

/// One turn of a conversation as read: the user's text and what is known of the reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub user: String,
    pub reply: Option<String>,
    pub output_tokens: Option<usize>,
}

/// ShareGPT's message keys (`from`/`value`), or OpenAI's (`role`/`content`).
#[derive(Deserialize)]
struct Message {
    #[serde(alias = "role")]
    from: String,
    #[serde(alias = "content")]
    value: String,
}

#[derive(Deserialize)]
struct ShareGptEntry {
    #[serde(alias = "messages")]
    conversations: Vec<Message>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlEntry {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    output_tokens: Option<usize>,
}

fn is_user(role: &str) -> bool {
    matches!(role, "human" | "user")
}

/// Pairs each user message with the reply after it (system and other roles left out).
fn turns_of(messages: Vec<Message>, output_tokens: Option<usize>) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut it = messages.into_iter().peekable();
    while let Some(m) = it.next() {
        if !is_user(&m.from) {
            continue;
        }
        let reply = it.next_if(|r| !is_user(&r.from) && r.from != "system").map(|r| r.value);
        turns.push(Turn { user: m.value, reply, output_tokens: None });
    }
    if let (Some(n), Some(last)) = (output_tokens, turns.last_mut()) {
        last.output_tokens = Some(n);
    }
    turns
}

/// Reads the conversations of `path`; each has at least one user turn (others are skipped).
pub fn read(path: &Path, format: DatasetFormat) -> Result<Vec<Vec<Turn>>, WorkloadError> {
    let bad = |reason: String| WorkloadError::Data { what: "dataset", path: path.to_path_buf(), reason };
    let format = match format {
        DatasetFormat::Auto => {
            let head = input::head(path, 64 << 10).map_err(|e| bad(e.to_string()))?;
            match head.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{') => DatasetFormat::Jsonl,
                _ => DatasetFormat::Sharegpt,
            }
        }
        f => f,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let conversations: Vec<Vec<Turn>> = match format {
        DatasetFormat::Sharegpt => {
            // Parsed from the stream: a file that is not JSON fails at its first bytes.
            let entries: Vec<ShareGptEntry> = serde_json::from_reader(std::io::BufReader::new(file))
                .map_err(|e| bad(format!("not a ShareGPT JSON array: {e}")))?;
            entries.into_iter().map(|e| turns_of(e.conversations, None)).collect()
        }
        _ => {
            let mut out = Vec::new();
            input::for_each_line(file, |i, line| {
                let e: JsonlEntry = serde_json::from_str(line).map_err(|e| format!("line {i}: {e}"))?;
                let turns = match (e.prompt, e.messages) {
                    (Some(p), None) => vec![Turn { user: p, reply: None, output_tokens: e.output_tokens }],
                    (None, Some(m)) => turns_of(m, e.output_tokens),
                    _ => return Err(format!("line {i}: needs exactly one of `prompt` and `messages`")),
                };
                out.push(turns);
                Ok(())
            })
            .map_err(|e| bad(e.to_string()))?;
            out
        }
    };
    let conversations: Vec<Vec<Turn>> = conversations.into_iter().filter(|c| !c.is_empty()).collect();
    if conversations.is_empty() {
        return Err(bad("no conversation with a user turn".into()));
    }
    Ok(conversations)
}

/// How a dataset's prompts are chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetOptions {
    /// Every request asks for this many output tokens, whatever the reply's length.
    pub output_tokens: Option<usize>,
    /// Turns whose prompt is shorter are left out (vLLM leaves out prompts under 4 tokens).
    pub min_input: usize,
    /// Turns whose prompt is longer are left out.
    pub max_input: Option<usize>,
    /// Replay whole conversations as sessions instead of first turns as single requests.
    pub sessions: bool,
}

/// One request of a dataset: its prompt (a user turn's tokens) and output length.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetTurn {
    pub prompt: Vec<TokenId>,
    pub output: usize,
}

/// A dataset tokenized for the model: conversations in the order the seed shuffled them.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    pub options: DatasetOptions,
    pub conversations: Vec<Vec<DatasetTurn>>,
    /// Conversations read, and left out by the length filters.
    pub read: usize,
    pub filtered: usize,
}

impl Dataset {
    /// Tokenizes `conversations` (single requests: the first turn of each) with `tok`, drops
    /// turns outside the length bounds or beyond `max_model_len` with their output, shuffles
    /// with `seed`.
    pub fn build(
        name: String,
        conversations: Vec<Vec<Turn>>,
        tok: &dyn TextCodec,
        options: DatasetOptions,
        max_model_len: usize,
        seed: u64,
    ) -> Result<Self, WorkloadError> {
        let read = conversations.len();
        let mut out: Vec<Vec<DatasetTurn>> = Vec::new();
        for conv in conversations {
            let take = if options.sessions { conv.len() } else { 1 };
            let mut turns = Vec::with_capacity(take);
            let mut context = 0usize;
            for t in conv.into_iter().take(take) {
                let prompt = tok.encode(&t.user).map_err(WorkloadError::Tokenize)?;
                let output = match (options.output_tokens, t.output_tokens, &t.reply) {
                    (Some(n), _, _) | (None, Some(n), _) => n,
                    (None, None, Some(r)) => tok.encode(r).map_err(WorkloadError::Tokenize)?.len(),
                    (None, None, None) => 128,
                }
                .max(1);
                context = context.saturating_add(prompt.len()).saturating_add(output);
                let too_long = options.max_input.is_some_and(|m| prompt.len() > m) || context > max_model_len;
                if prompt.len() < options.min_input || too_long {
                    break;
                }
                turns.push(DatasetTurn { prompt, output });
            }
            if !turns.is_empty() {
                out.push(turns);
            }
        }
        if out.is_empty() {
            let problem = format!(
                "none of its {read} conversations fits the length bounds and the model's context of {max_model_len}"
            );
            return Err(crate::Invalid::new(format!("dataset {name}"), problem).into());
        }
        out.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed ^ 0xDA7A));
        let filtered = read - out.len();
        Ok(Dataset { name, options, conversations: out, read, filtered })
    }

    /// Request `id`: the first turn of conversation `id` (cycling when the run asks for more
    /// requests than the dataset holds).
    pub fn request(&self, id: u64) -> WorkRequest {
        let t = &self.conversations[(id % self.conversations.len() as u64) as usize][0];
        WorkRequest { session: None, id, prompt: t.prompt.clone(), params: SamplingParams::greedy_exact(t.output) }
    }

    /// The most turns a session has (request ids are spaced by it).
    pub fn max_turns(&self) -> usize {
        self.conversations.iter().map(Vec::len).max().unwrap_or(1)
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        let turns: Vec<&DatasetTurn> = self.conversations.iter().flatten().collect();
        let mean = |f: fn(&DatasetTurn) -> usize| turns.iter().map(|t| f(t)).sum::<usize>() as f64 / turns.len() as f64;
        format!(
            "{}{}: {} conversations ({} of {} read left out by length), mean input {:.0}, output {:.0} tokens",
            self.name,
            if self.options.sessions { " as sessions" } else { "" },
            self.conversations.len(),
            self.filtered,
            self.read,
            mean(|t| t.prompt.len()),
            mean(|t| t.output),
        )
    }
}

/// What every dataset session of a level needs.
struct Sessions<T> {
    target: Arc<T>,
    data: Arc<Dataset>,
    plan: UnitPlan,
    collector: Collector,
}

impl<T: Target> Sessions<T> {
    /// Session `s`: conversation `first + s` turn by turn, each with the history before it
    /// (earlier user turns and the target's answers), until one fails.
    async fn session(self: Arc<Self>, s: u64) {
        let per = self.data.max_turns() as u64;
        let session = self.plan.first_id / per + s;
        let conv = &self.data.conversations[(session % self.data.conversations.len() as u64) as usize];
        let mut history: Vec<TokenId> = Vec::new();
        for (turn, t) in conv.iter().enumerate() {
            history.extend_from_slice(&t.prompt);
            let id = self.plan.first_id + s * per + turn as u64;
            let req = WorkRequest {
                session: Some(session),
                id,
                prompt: history.clone(),
                params: SamplingParams::greedy_exact(t.output),
            };
            let intended = self.target.clock().now();
            let mut rec = send(&*self.target, req, intended, self.plan.timeout, self.plan.retry).await;
            rec.session = Some(session);
            rec.turn = Some(turn as u32 + 1);
            let ok = rec.is_ok();
            history.extend(std::mem::take(&mut rec.output_ids));
            self.collector.push(rec);
            if !ok || self.plan.stop.raised() {
                break;
            }
        }
    }
}

/// Runs `plan.total()` dataset conversations as sessions over `plan.users` closed-loop users.
pub async fn run_dataset_sessions<T: Target>(target: Arc<T>, data: Arc<Dataset>, plan: UnitPlan) -> LevelRun {
    let clock = target.clock();
    let start = clock.now();
    let window = plan.window(data.max_turns() as u64, start);
    let collector = Collector::new(window, false, &plan).closed(data.max_turns() as u64);
    let users = Users::of(&plan, None);
    let sessions = Arc::new(Sessions { target, data, plan, collector });
    let s = sessions.clone();
    let started = closed_loop(users, sessions.clone(), move |w| s.collector.warmed(w), Sessions::session).await;
    let mut run = sessions.collector.finish(start, clock.now(), |_| window).0;
    run.ramp = Some(started.ramp);
    run
}

impl Prompts for Dataset {
    /// The dataset was shuffled with the run's seed when it was built.
    fn request(&self, _seed: u64, id: u64, _index: u64, _vocab: usize) -> WorkRequest {
        Dataset::request(self, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per whitespace-separated word (decoded as one word per id).
    struct Words;
    impl TextCodec for Words {
        fn encode(&self, text: &str) -> Result<Vec<TokenId>, goodput_core::CodecError> {
            Ok(text.split_whitespace().map(|w| w.len() as TokenId + 3).collect())
        }
        fn decode(&self, ids: &[TokenId]) -> Result<String, goodput_core::CodecError> {
            Ok(vec!["w"; ids.len()].join(" "))
        }
    }

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("goodput-dataset-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    const SHAREGPT: &str = r#"[
      {"id": "a", "conversations": [{"from": "human", "value": "one two three four"},
                                    {"from": "gpt", "value": "five six"},
                                    {"from": "human", "value": "seven eight nine ten eleven"},
                                    {"from": "gpt", "value": "twelve"}]},
      {"id": "b", "conversations": [{"from": "system", "value": "be brief"},
                                    {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there you"}]},
      {"id": "c", "conversations": [{"from": "gpt", "value": "no question"}]}
    ]"#;

    #[test]
    fn sharegpt_first_turns_with_reply_lengths_filtered_and_shuffled() {
        let convs = read(&file("sg.json", SHAREGPT), DatasetFormat::Auto).unwrap();
        assert_eq!(convs.len(), 2, "a conversation without a user turn is skipped");
        assert_eq!(
            convs[0][1],
            Turn { user: "seven eight nine ten eleven".into(), reply: Some("twelve".into()), output_tokens: None }
        );
        let opts = DatasetOptions { output_tokens: None, min_input: 4, max_input: None, sessions: false };
        let d = Dataset::build("sg".into(), convs.clone(), &Words, opts.clone(), 4096, 1).unwrap();
        // "hi" is 1 token, under the minimum of 4.
        assert_eq!((d.conversations.len(), d.filtered, d.read), (1, 1, 2));
        let r = d.request(7);
        assert_eq!((r.prompt.len(), r.params.max_tokens, r.id), (4, 2, 7));
        let fixed = DatasetOptions { output_tokens: Some(9), min_input: 1, ..opts.clone() };
        let d = Dataset::build("sg".into(), convs.clone(), &Words, fixed, 4096, 1).unwrap();
        assert!(d.conversations.iter().all(|c| c[0].output == 9));
        let sessions = DatasetOptions { sessions: true, ..opts };
        let d = Dataset::build("sg".into(), convs, &Words, sessions, 4096, 1).unwrap();
        assert_eq!(d.max_turns(), 2);
        assert_eq!(d.conversations[0].iter().map(|t| (t.prompt.len(), t.output)).collect::<Vec<_>>(), [(4, 2), (5, 1)]);
    }

    #[test]
    fn jsonl_prompts_and_messages_and_refusals_by_line() {
        let text = "{\"prompt\": \"a b c d e\", \"output_tokens\": 3}\n\n\
                    {\"messages\": [{\"role\": \"user\", \"content\": \"x y z w\"}, {\"role\": \"assistant\", \"content\": \"ok\"}]}\n";
        let convs = read(&file("j.jsonl", text), DatasetFormat::Jsonl).unwrap();
        assert_eq!(convs[0][0].output_tokens, Some(3));
        assert_eq!(convs[1][0].reply.as_deref(), Some("ok"));
        let err = read(&file("bad.jsonl", "{\"prompt\": \"a\"}\n{\"text\": 1}\n"), DatasetFormat::Jsonl).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err =
            read(&file("both.jsonl", "{\"prompt\": \"a\", \"messages\": []}\n"), DatasetFormat::Jsonl).unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
        let opts = DatasetOptions { output_tokens: None, min_input: 4, max_input: Some(4), sessions: false };
        // "a b c d e" is 5 tokens, beyond max_input 4; the other fits.
        let d = Dataset::build("j".into(), convs.clone(), &Words, opts.clone(), 4096, 0).unwrap();
        assert_eq!(d.conversations.len(), 1);
        assert!(Dataset::build("j".into(), convs, &Words, opts, 3, 0)
            .unwrap_err()
            .to_string()
            .contains("none of its 2"));
    }

    #[test]
    fn boundary_output_tokens_are_left_out_not_wrapped() {
        let text = format!(
            "{{\"prompt\": \"a b c d\", \"output_tokens\": {}}}\n{{\"prompt\": \"a b c d\", \"output_tokens\": 2}}\n",
            u64::MAX
        );
        let convs = read(&file("max.jsonl", &text), DatasetFormat::Auto).unwrap();
        let opts = DatasetOptions { output_tokens: None, min_input: 1, max_input: None, sessions: true };
        let d = Dataset::build("max".into(), convs, &Words, opts, 2048, 0).unwrap();
        assert_eq!((d.conversations.len(), d.filtered), (1, 1));
        assert_eq!(d.conversations[0][0].output, 2);
        let huge = format!("{{\"prompt\": \"a\", \"output_tokens\": 1{}}}\n", "0".repeat(30));
        let err = read(&file("huge.jsonl", &huge), DatasetFormat::Auto).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
