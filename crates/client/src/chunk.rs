//! The fast path of a stream event: the fields a token chunk carries, borrowed from the
//! event's text by a typed parse — the first choice's `text`, `delta.content`,
//! `delta.reasoning` (or `reasoning_content`) and `token_ids`, or a Responses API text
//! delta — without building a `serde_json::Value` tree per token (every key a `String`, every
//! object a map, all dropped at once). Every other field is skipped unread. An event with
//! anything else to say (usage, an error, the server's timings, TGI's `token`, any other
//! Responses event) or of another shape is [`Fast::Other`], and the general path reads it.

use goodput_core::TokenId;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::marker::PhantomData;

/// What the fast path made of an event.
#[derive(Debug, PartialEq)]
pub enum Fast<'a> {
    /// A token chunk (or an empty one): its answer text, its reasoning text, its token ids.
    Chunk { text: Option<Cow<'a, str>>, reasoning: Option<Cow<'a, str>>, ids: Option<Vec<TokenId>> },
    /// Something the general path reads.
    Other,
}

/// Reads `data` (an event's JSON) on the fast path.
pub fn read(data: &str) -> Fast<'_> {
    let Ok(e) = serde_json::from_str::<Event<'_>>(data) else { return Fast::Other };
    if e.error.is_some() || e.usage.is_some() || e.goodput.is_some() || e.token.is_some() {
        return Fast::Other;
    }
    match e.kind.as_deref() {
        None => {
            let Choices(first) = e.choices;
            let Some(c) = first else { return Fast::Chunk { text: None, reasoning: None, ids: None } };
            let (content, reasoning) = match c.delta {
                Some(d) => (d.content, d.reasoning.or(d.reasoning_content)),
                None => (None, None),
            };
            Fast::Chunk { text: c.text.or(content), reasoning, ids: c.token_ids }
        }
        Some("response.output_text.delta") => Fast::Chunk { text: e.delta, reasoning: None, ids: None },
        Some("response.reasoning_text.delta" | "response.reasoning_summary_text.delta") => {
            Fast::Chunk { text: None, reasoning: e.delta, ids: None }
        }
        Some(_) => Fast::Other,
    }
}

/// The top level of an event: the fields read, and those whose presence sends it to the
/// general path (any value but null).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default)]
    choices: Choices<'a>,
    /// A Responses API event's type, and its text delta.
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    usage: Option<IgnoredAny>,
    #[serde(default)]
    goodput: Option<IgnoredAny>,
    #[serde(default)]
    token: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    token_ids: Option<Vec<TokenId>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
}

/// `choices`: its first element read, the rest skipped (no `Vec`).
#[derive(Default)]
struct Choices<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for First<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Choices<'a>, A::Error> {
                let first = seq.next_element::<Choice<'a>>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Choices(first))
            }
            fn visit_unit<E>(self) -> Result<Choices<'a>, E> {
                Ok(Choices(None))
            }
        }
        d.deserialize_any(First(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: Option<&str>, reasoning: Option<&str>, ids: Option<Vec<TokenId>>) -> Fast<'static> {
        Fast::Chunk {
            text: text.map(|t| Cow::Owned(t.into())),
            reasoning: reasoning.map(|t| Cow::Owned(t.into())),
            ids,
        }
    }

    #[test]
    fn the_shapes_of_a_token_chunk() {
        let completions = r#"{"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":null}]}"#;
        assert_eq!(read(completions), chunk(Some("x"), None, None));
        let chat = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"hé\n\"q\""}}],"usage":null}"#;
        assert_eq!(read(chat), chunk(Some("hé\n\"q\""), None, None), "escapes are unescaped, usage: null is none");
        let think = r#"{"choices":[{"delta":{"reasoning":null,"reasoning_content":"hm"}}]}"#;
        assert_eq!(read(think), chunk(None, Some("hm"), None));
        let ids = r#"{"choices":[{"text":"ab","token_ids":[5,6]},{"text":"other choice"}]}"#;
        assert_eq!(read(ids), chunk(Some("ab"), None, Some(vec![5, 6])), "the first choice only");
        assert_eq!(read(r#"{"choices":[]}"#), chunk(None, None, None));
        let delta = r#"{"type":"response.output_text.delta","delta":"y","item_id":"i"}"#;
        assert_eq!(read(delta), chunk(Some("y"), None, None));
    }

    #[test]
    fn anything_else_goes_to_the_general_path() {
        for other in [
            r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"token":{"text":"x","special":false}}"#,
            r#"{"choices":[],"goodput":{"queue_s":0.1}}"#,
            r#"{"type":"response.completed","response":{}}"#,
            r#"{"choices":[{"text":5}]}"#,
            r#"{"choices":"x"}"#,
            "not json",
        ] {
            assert_eq!(read(other), Fast::Other, "{other}");
        }
    }
}
