//! The reasoning split of a chat response, as vLLM's reasoning parsers make it: which output
//! tokens are reasoning (streamed as `delta.reasoning`, counted in usage's
//! `completion_tokens_details.reasoning_tokens`) and which the answer (`delta.content`).
//!
//! Two sources, the first that applies:
//! - goodput's request extension `"goodput": {"reasoning_tokens": N}`: the first N output
//!   tokens are reasoning. It lets a reasoning workload run on weights that do not think
//!   (dummy weights: the `reasoning` scenario), and is documented as goodput's own.
//! - `--reasoning-parser think-tags` (Qwen3 / DeepSeek-R1 style, vLLM's `deepseek_r1`):
//!   everything before `</think>` is reasoning — the chat templates of those models open
//!   `<think>` in the prompt, so the output need not — and everything after it the answer. The
//!   tags are tokens of the output (counted as reasoning) but carry no text.
//!
//! Completions are never split (vLLM splits chat only). [`Split`] is a plain state machine,
//! fed one token at a time.

use goodput_core::TokenId;
use goodput_engine::tokenizer::Tokenizer;

/// How the server finds reasoning in a model's output (`goodput serve --reasoning-parser`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningParser {
    /// No reasoning split: the whole output is the answer (unless a request asks for a
    /// reasoning prefix through goodput's extension).
    #[default]
    None,
    /// `<think>…</think>`: the output before the end tag is reasoning.
    ThinkTags { start: Option<TokenId>, end: TokenId },
}

/// Why a reasoning parser cannot serve this model.
#[derive(Debug, thiserror::Error)]
pub enum ReasoningError {
    #[error("--reasoning-parser think-tags: the tokenizer has no `</think>` token (it is for models whose chat template thinks, as Qwen3's or DeepSeek-R1's)")]
    NoEndTag,
    #[error("unknown --reasoning-parser `{0}`: choose none or think-tags")]
    Unknown(String),
}

impl ReasoningParser {
    /// The parser named `name` (`none`, `think-tags`) for the model of `tokenizer`.
    pub fn named(name: &str, tokenizer: &Tokenizer) -> Result<Self, ReasoningError> {
        match name {
            "none" => Ok(ReasoningParser::None),
            "think-tags" => {
                let end = tokenizer.token_to_id("</think>").ok_or(ReasoningError::NoEndTag)?;
                Ok(ReasoningParser::ThinkTags { start: tokenizer.token_to_id("<think>"), end })
            }
            other => Err(ReasoningError::Unknown(other.into())),
        }
    }
}

/// What one output token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Reasoning, with text.
    Reasoning,
    /// A think tag: a reasoning token without text.
    Tag,
    /// The answer.
    Answer,
}

/// The split of one response, token by token.
#[derive(Clone, Debug)]
pub struct Split {
    /// goodput's extension: this many first tokens are reasoning.
    prefix: Option<usize>,
    tags: Option<(Option<TokenId>, TokenId)>,
    /// Still in the reasoning phase.
    reasoning: bool,
    seen: usize,
    reasoning_tokens: usize,
}

impl Split {
    /// The split of a chat response under `parser`, with the request's reasoning prefix
    /// (`0`: none asked); a completion's (`chat` false) holds only the answer.
    pub fn new(parser: ReasoningParser, prefix: usize, chat: bool) -> Self {
        let prefix = (chat && prefix > 0).then_some(prefix);
        let tags = match parser {
            ReasoningParser::ThinkTags { start, end } if chat && prefix.is_none() => Some((start, end)),
            _ => None,
        };
        Split { prefix, tags, reasoning: prefix.is_some() || tags.is_some(), seen: 0, reasoning_tokens: 0 }
    }

    /// Whether the response is split at all (its usage then says the reasoning tokens).
    pub fn active(&self) -> bool {
        self.prefix.is_some() || self.tags.is_some()
    }

    /// What the next output token, `id`, is.
    pub fn next(&mut self, id: TokenId) -> Part {
        self.seen += 1;
        let part = match (self.prefix, self.tags) {
            (Some(n), _) => {
                if self.seen <= n {
                    Part::Reasoning
                } else {
                    Part::Answer
                }
            }
            (None, Some((start, end))) if self.reasoning => {
                if id == end {
                    self.reasoning = false;
                    Part::Tag
                } else if Some(id) == start {
                    Part::Tag
                } else {
                    Part::Reasoning
                }
            }
            _ => Part::Answer,
        };
        if part != Part::Answer {
            self.reasoning_tokens += 1;
        }
        part
    }

    /// Output tokens that were reasoning (tags included); `None` when the response is not
    /// split.
    pub fn reasoning_tokens(&self) -> Option<usize> {
        self.active().then_some(self.reasoning_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THINK: ReasoningParser = ReasoningParser::ThinkTags { start: Some(100), end: 101 };

    fn parts(mut s: Split, ids: &[TokenId]) -> (Vec<Part>, Option<usize>) {
        (ids.iter().map(|&id| s.next(id)).collect(), s.reasoning_tokens())
    }

    #[test]
    fn think_tags_split_at_the_end_tag_with_or_without_the_opening_one() {
        use Part::*;
        // <think> a b </think> c d: four reasoning tokens (tags included), two of the answer.
        let got = parts(Split::new(THINK, 0, true), &[100, 1, 2, 101, 3, 4]);
        assert_eq!(got, (vec![Tag, Reasoning, Reasoning, Tag, Answer, Answer], Some(4)));
        // The template opened <think> in the prompt: all before </think> is reasoning.
        assert_eq!(parts(Split::new(THINK, 0, true), &[1, 101, 2]), (vec![Reasoning, Tag, Answer], Some(2)));
        // Never closed (dummy weights): all reasoning, as vLLM's deepseek_r1 parser reports.
        assert_eq!(parts(Split::new(THINK, 0, true), &[1, 2]).1, Some(2));
        // A later </think> or <think> in the answer is the answer's.
        assert_eq!(parts(Split::new(THINK, 0, true), &[101, 101, 100]).0, vec![Tag, Answer, Answer]);
    }

    #[test]
    fn the_extension_s_prefix_wins_and_completions_are_never_split() {
        use Part::*;
        let got = parts(Split::new(THINK, 2, true), &[101, 5, 6]);
        assert_eq!(got, (vec![Reasoning, Reasoning, Answer], Some(2)));
        assert_eq!(parts(Split::new(ReasoningParser::None, 3, true), &[1, 2]), (vec![Reasoning, Reasoning], Some(2)));
        assert_eq!(parts(Split::new(THINK, 2, false), &[1, 101]), (vec![Answer, Answer], None));
        assert_eq!(parts(Split::new(ReasoningParser::None, 0, true), &[1]), (vec![Answer], None));
    }
}
