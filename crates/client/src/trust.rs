//! A server's own numbers of one request, checked against what the client sent and received
//! before any of them is used. A server that reports 10¹⁵ completion tokens, a cache hit on
//! more tokens than the prompt held, or engine stamps that go back in time would otherwise
//! turn into throughputs, shares and durations no server can have. A refused figure is
//! dropped from the record (the client's own count stands in), and the request carries an
//! [`Anomaly`] saying what was refused and why; levels count them (`server_anomalies`).
//!
//! What the client knows for certain: every content chunk of a token-streaming server carries
//! at least one token; token ids, when the server sends them (`return_token_ids`), count the
//! output exactly; the prompt sent as token ids has exactly its length (a text prompt gains a
//! chat template's tokens); and `max_tokens` bounds what an honest server generates. The
//! client's tokenizer count of the received text is not exact (re-encoding decoded text can
//! merge or split tokens), so it only vouches for a server's count: a gateway that re-splits
//! text into more chunks than tokens is believed where the tokenizer agrees with it.

use goodput_core::{Anomaly, AnomalyKind, Chunk, HttpStamps, ServerTimings, Stamp};

/// Two counts of the same tokens agree when they differ by at most this many tokens, or by
/// [`COUNT_TOLERANCE_SHARE`] of the client's count when that is more: room for an end or stop
/// token a server counts but does not stream, a BOS token, or a gateway that splits a token's
/// text across two chunks.
pub const COUNT_TOLERANCE_TOKENS: usize = 4;
/// See [`COUNT_TOLERANCE_TOKENS`].
pub const COUNT_TOLERANCE_SHARE: f64 = 0.10;
/// Text prompts (chat, completions with text): tokens a server's chat template and default
/// system prompt may add to the prompt sent, beyond the tolerance.
pub const TEMPLATE_TOKENS: usize = 1024;

/// The tolerance around a count of `n` tokens: max(4, ⌈10 % × n⌉).
pub fn tolerance(n: usize) -> usize {
    COUNT_TOLERANCE_TOKENS.max((n as f64 * COUNT_TOLERANCE_SHARE).ceil() as usize)
}

/// What the client sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    /// When it was sent (on the client's clock).
    pub at: Stamp,
    /// The prompt's length in tokens, as the workload drew it.
    pub prompt_tokens: usize,
    /// The prompt went as text (a template may add [`TEMPLATE_TOKENS`]).
    pub text_prompt: bool,
    /// The request's `max_tokens`, as sent.
    pub max_tokens: Option<usize>,
}

/// What the client received of the output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received<'a> {
    pub chunks: &'a [Chunk],
    /// The exact count, when the server sent the token ids.
    pub exact: Option<usize>,
    /// The client's tokenizer count of the received text, when it has a tokenizer.
    pub counted: Option<usize>,
    /// Of the chunks, those that were reasoning.
    pub reasoning_chunks: usize,
}

impl Received<'_> {
    /// Tokens the content chunks carry at least (one each, or their ids).
    fn lower(&self) -> usize {
        self.chunks.iter().map(|c| c.tokens as usize).sum()
    }
    /// The client's own count of output tokens.
    fn streamed(&self) -> usize {
        self.exact.unwrap_or_else(|| self.lower())
    }
}

/// Checks the server's figures in `h`, drops those it refuses (each noted in
/// `h.anomalies`), and returns the request's `(input_tokens, output_tokens)`: the server's
/// counts where they stand, else the prompt's length and the client's count of the stream.
pub(crate) fn settle(h: &mut HttpStamps, sent: &Sent, got: &Received) -> (usize, usize) {
    let streamed = got.streamed();
    if let Some(max) = sent.max_tokens.filter(|&m| streamed > m) {
        let why = format!("{streamed} output tokens streamed against max_tokens {max}: the server ignored it");
        flag(h, AnomalyKind::OverMaxTokens, why);
    }
    if let Some(why) = h.usage_completion_tokens.and_then(|u| output_refusal(u, sent, got)) {
        flag(h, AnomalyKind::CompletionTokens, format!("usage.completion_tokens {why}"));
        h.usage_completion_tokens = None;
    }
    if let Some(why) = h.usage_prompt_tokens.and_then(|n| prompt_refusal(n, sent)) {
        flag(h, AnomalyKind::PromptTokens, format!("usage.prompt_tokens {why}"));
        h.usage_prompt_tokens = None;
    }
    let bound =
        h.usage_prompt_tokens.unwrap_or(sent.prompt_tokens + if sent.text_prompt { TEMPLATE_TOKENS } else { 0 });
    if let Some(c) = h.usage_cached_tokens.filter(|&c| c > bound) {
        flag(h, AnomalyKind::CachedTokens, format!("usage cached_tokens {c} above the {bound} prompt tokens"));
        h.usage_cached_tokens = None;
    }
    let output = h.usage_completion_tokens.unwrap_or(streamed);
    if let Some(why) = h.usage_reasoning_tokens.and_then(|r| reasoning_refusal(r, output, got.reasoning_chunks)) {
        flag(h, AnomalyKind::ReasoningTokens, format!("usage reasoning_tokens {why}"));
        h.usage_reasoning_tokens = None;
    }
    let first_chunk = got.chunks.first().map(|c| c.at);
    if let Some(why) = h.server.as_ref().and_then(|t| timings_refusal(t, sent, got, h.same_clock, first_chunk)) {
        flag(h, AnomalyKind::ServerTimings, why);
        h.server = None;
    }
    (h.usage_prompt_tokens.unwrap_or(sent.prompt_tokens), h.usage_completion_tokens.unwrap_or(streamed))
}

/// Why a server's count `r` of reasoning tokens cannot be right: more than the request's
/// `output` tokens (reasoning is part of them), or fewer than the reasoning chunks streamed
/// (each carries a token); each beyond [`tolerance`].
fn reasoning_refusal(r: usize, output: usize, chunks: usize) -> Option<String> {
    if r > output + tolerance(output) {
        return Some(format!("{r} above the {output} output tokens it is part of"));
    }
    (r + tolerance(chunks) < chunks).then(|| format!("{r} below the {chunks} reasoning chunks streamed"))
}

fn flag(h: &mut HttpStamps, kind: AnomalyKind, message: String) {
    h.anomalies.push(Anomaly { kind, message });
}

/// Why a server's count `n` of output tokens cannot be right, if it cannot: above
/// `max_tokens` (or above the stream, when the stream itself passed `max_tokens`), below the
/// content chunks streamed (unless the client's tokenizer agrees with `n`), or off the token
/// ids streamed; each beyond [`tolerance`].
fn output_refusal(n: usize, sent: &Sent, got: &Received) -> Option<String> {
    let (lower, streamed) = (got.lower(), got.streamed());
    if let Some(max) = sent.max_tokens.filter(|&m| n > m.max(streamed)) {
        return Some(format!("{n} above max_tokens {max} ({streamed} tokens streamed)"));
    }
    let vouched = got.counted.is_some_and(|c| n.abs_diff(c) <= tolerance(c));
    if n + tolerance(lower) < lower && !vouched {
        return Some(format!("{n} below the {lower} content chunks streamed (each carries a token)"));
    }
    match got.exact {
        Some(e) if n.abs_diff(e) > tolerance(e) => Some(format!("{n} against the {e} token ids streamed")),
        _ => None,
    }
}

/// Why a server's count `n` of prompt tokens cannot be right, if it cannot: off the prompt's
/// length beyond [`tolerance`] (plus [`TEMPLATE_TOKENS`] above it for a text prompt).
fn prompt_refusal(n: usize, sent: &Sent) -> Option<String> {
    let s = sent.prompt_tokens;
    let low = s.saturating_sub(tolerance(s));
    let high = s + tolerance(s) + if sent.text_prompt { TEMPLATE_TOKENS } else { 0 };
    (n < low || n > high).then(|| format!("{n} against the {s}-token prompt sent (at most {low}..={high} accepted)"))
}

/// Why a server's engine stamps of a request cannot be right, if they cannot: stamps out of
/// their order (received ≤ arrival ≤ queued ≤ first scheduled ≤ first token ≤ first text ≤
/// last token ≤ finished); on the client's clock, received before sent or the first text
/// after the client got it; counts that contradict the prompt, the stream or themselves.
fn timings_refusal(
    t: &ServerTimings,
    sent: &Sent,
    got: &Received,
    same_clock: bool,
    first_chunk: Option<Stamp>,
) -> Option<String> {
    if let Some((name, at, before, b)) = t.out_of_order() {
        return Some(format!("server stamps out of order: {name} {} ns before {before} {} ns", at.0, b.0));
    }
    if same_clock {
        if t.received < sent.at {
            return Some(format!(
                "server stamps: received {} ns before the client sent {} ns",
                t.received.0, sent.at.0
            ));
        }
        if let (Some(text), Some(c)) = (t.first_text.or(t.first_token), first_chunk) {
            if c < text {
                return Some(format!(
                    "server stamps: first text {} ns after the client received it {} ns",
                    text.0, c.0
                ));
            }
        }
    }
    if t.cached_tokens > t.prompt_tokens {
        return Some(format!("engine cached_tokens {} above its prompt_tokens {}", t.cached_tokens, t.prompt_tokens));
    }
    if let Some(why) = prompt_refusal(t.prompt_tokens, sent) {
        return Some(format!("engine prompt_tokens {why}"));
    }
    output_refusal(t.generated_tokens, sent, got).map(|why| format!("engine generated_tokens {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{FinishReason, HttpStamps};

    fn chunks(n: u64) -> Vec<Chunk> {
        (0..n).map(|i| Chunk { at: Stamp(1_000 + i), tokens: 1 }).collect()
    }

    fn sent(prompt: usize, max: usize) -> Sent {
        Sent { at: Stamp(0), prompt_tokens: prompt, text_prompt: false, max_tokens: Some(max) }
    }

    fn kinds(h: &HttpStamps) -> Vec<AnomalyKind> {
        h.anomalies.iter().map(|a| a.kind).collect()
    }

    #[test]
    fn tolerance_is_four_tokens_or_a_tenth() {
        assert_eq!((tolerance(0), tolerance(40), tolerance(41), tolerance(1000)), (4, 4, 5, 100));
    }

    #[test]
    fn counts_that_agree_are_used() {
        // 12 chunks of one token, usage 13 (an end token not streamed), prompt 100 of 100.
        let c = chunks(12);
        let mut h =
            HttpStamps { usage_completion_tokens: Some(13), usage_prompt_tokens: Some(100), ..Default::default() };
        h.usage_cached_tokens = Some(100);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 0 };
        assert_eq!(settle(&mut h, &sent(100, 16), &got), (100, 13));
        assert!(h.anomalies.is_empty(), "{:?}", h.anomalies);
        // Nothing from the server: the prompt's length and the stream's count.
        let mut h = HttpStamps::default();
        assert_eq!(settle(&mut h, &sent(100, 16), &got), (100, 12));
    }

    #[test]
    fn a_completion_count_no_stream_can_have_is_refused() {
        let c = chunks(12);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 0 };
        // 10¹⁵ against max_tokens 16: refused, the 12 streamed tokens stand.
        let mut h = HttpStamps { usage_completion_tokens: Some(1_000_000_000_000_000), ..Default::default() };
        assert_eq!(settle(&mut h, &sent(100, 16), &got), (100, 12));
        assert_eq!((kinds(&h), h.usage_completion_tokens), (vec![AnomalyKind::CompletionTokens], None));
        assert!(h.anomalies[0].message.contains("1000000000000000 above max_tokens 16"), "{}", h.anomalies[0].message);
        // Fewer than the content chunks beyond the tolerance (12 − 4 = 8 still passes, 7 does not).
        for (n, refused) in [(8, false), (7, true)] {
            let mut h = HttpStamps { usage_completion_tokens: Some(n), ..Default::default() };
            settle(&mut h, &sent(100, 16), &got);
            assert_eq!(!h.anomalies.is_empty(), refused, "usage {n}");
        }
        // A gateway that splits 5 tokens' text into 12 chunks: believed where the client's
        // tokenizer counts 6, not where it counts 12.
        for (counted, refused) in [(6, false), (12, true)] {
            let got = Received { counted: Some(counted), ..got };
            let mut h = HttpStamps { usage_completion_tokens: Some(5), ..Default::default() };
            let (_, out) = settle(&mut h, &sent(100, 16), &got);
            assert_eq!((h.anomalies.is_empty(), out), (!refused, if refused { 12 } else { 5 }), "counted {counted}");
        }
        // Token ids say 12: usage 17 is within max_tokens but off the ids by more than 4.
        let exact = Received { chunks: &c, exact: Some(12), counted: None, reasoning_chunks: 0 };
        let mut h = HttpStamps { usage_completion_tokens: Some(17), ..Default::default() };
        assert_eq!(settle(&mut h, &sent(100, 20), &exact), (100, 12));
        assert!(h.anomalies[0].message.contains("against the 12 token ids"), "{:?}", h.anomalies);
    }

    /// Reasoning counts: 30 of 40 output tokens stands; 60 of 40, or 10 against 30 reasoning
    /// chunks streamed (tolerance 4), is refused and dropped.
    #[test]
    fn a_reasoning_count_beyond_the_output_or_below_its_chunks_is_refused() {
        let c = chunks(40);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 30 };
        let with =
            |r| HttpStamps { usage_completion_tokens: Some(40), usage_reasoning_tokens: Some(r), ..Default::default() };
        let mut ok = with(30);
        settle(&mut ok, &sent(10, 64), &got);
        assert_eq!((ok.usage_reasoning_tokens, kinds(&ok)), (Some(30), vec![]));
        for (r, why) in [(60, "60 above the 40 output tokens"), (10, "10 below the 30 reasoning chunks")] {
            let mut h = with(r);
            settle(&mut h, &sent(10, 64), &got);
            assert_eq!((h.usage_reasoning_tokens, kinds(&h)), (None, vec![AnomalyKind::ReasoningTokens]));
            assert!(h.anomalies[0].message.contains(why), "{}", h.anomalies[0].message);
        }
    }

    #[test]
    fn a_stream_past_max_tokens_is_flagged_and_counted_as_streamed() {
        // 76,925 content chunks against max_tokens 100; usage agrees with the stream.
        let c = chunks(76_925);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 0 };
        let mut h = HttpStamps { usage_completion_tokens: Some(76_925), ..Default::default() };
        assert_eq!(settle(&mut h, &sent(10, 100), &got), (10, 76_925));
        assert_eq!(kinds(&h), [AnomalyKind::OverMaxTokens]);
        assert!(h.anomalies[0].message.contains("76925 output tokens streamed against max_tokens 100"));
    }

    #[test]
    fn prompt_and_cached_counts_are_bounded_by_the_prompt_sent() {
        let c = chunks(4);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 0 };
        // Token ids: 128 sent; 132 passes (tolerance 13), 142 does not.
        for (n, refused) in [(132, false), (141, false), (142, true), (115, false), (114, true)] {
            let mut h = HttpStamps { usage_prompt_tokens: Some(n), ..Default::default() };
            let (input, _) = settle(&mut h, &sent(128, 4), &got);
            assert_eq!((!h.anomalies.is_empty(), input), (refused, if refused { 128 } else { n }), "prompt {n}");
        }
        // Text: a chat template may add up to 1024 more.
        let text = Sent { text_prompt: true, ..sent(128, 4) };
        let mut h = HttpStamps { usage_prompt_tokens: Some(128 + 13 + 1024), ..Default::default() };
        settle(&mut h, &text, &got);
        assert!(h.anomalies.is_empty());
        // Cached above the prompt: refused; the prompt count stands.
        let mut h = HttpStamps {
            usage_prompt_tokens: Some(164),
            usage_cached_tokens: Some(1_000_000_000),
            ..Default::default()
        };
        assert_eq!(settle(&mut h, &sent(164, 4), &got), (164, 4));
        assert_eq!((kinds(&h), h.usage_cached_tokens), (vec![AnomalyKind::CachedTokens], None));
    }

    fn timings() -> ServerTimings {
        ServerTimings {
            received: Stamp(10),
            arrival: Stamp(20),
            queued: Stamp(30),
            first_scheduled: Some(Stamp(40)),
            first_token: Some(Stamp(50)),
            first_text: Some(Stamp(60)),
            last_token: Some(Stamp(900)),
            finished: Stamp(950),
            prompt_tokens: 164,
            cached_tokens: 16,
            generated_tokens: 4,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        }
    }

    #[test]
    fn engine_stamps_out_of_order_or_contradicting_the_request_are_dropped() {
        let c = chunks(4);
        let got = Received { chunks: &c, exact: None, counted: None, reasoning_chunks: 0 };
        let check = |t: ServerTimings, same_clock: bool| {
            let mut h = HttpStamps { server: Some(t), same_clock, ..Default::default() };
            settle(&mut h, &sent(164, 4), &got);
            (h.server.is_some(), h.anomalies.first().map(|a| a.message.clone()))
        };
        assert_eq!(check(timings(), true), (true, None));
        // Reversed: first scheduled before queued (a negative queue time), finished before the last token.
        let bad = [
            ServerTimings { first_scheduled: Some(Stamp(25)), ..timings() },
            ServerTimings { finished: Stamp(800), ..timings() },
            ServerTimings { received: Stamp(100), ..timings() },
            ServerTimings { cached_tokens: 1_000_000_000, ..timings() },
            ServerTimings { prompt_tokens: 1, cached_tokens: 0, ..timings() },
            ServerTimings { generated_tokens: 1_000_000, ..timings() },
        ];
        for t in bad {
            let (kept, why) = check(t.clone(), false);
            assert!(!kept && why.is_some(), "{t:?}");
        }
        assert_eq!(
            check(ServerTimings { first_scheduled: Some(Stamp(25)), ..timings() }, false).1.unwrap(),
            "server stamps out of order: first_scheduled 25 ns before queued 30 ns"
        );
        // On one clock: the server received it before it was sent, or its first text came after
        // the client had it.
        let mut late = timings();
        late.first_text = Some(Stamp(1_500));
        late.last_token = Some(Stamp(1_500));
        late.finished = Stamp(1_500);
        assert!(!check(late.clone(), true).0);
        assert!(check(late, false).0, "another process's clock: not compared with the client's");
        let mut h = HttpStamps { server: Some(timings()), same_clock: true, ..Default::default() };
        settle(&mut h, &Sent { at: Stamp(11), ..sent(164, 4) }, &got);
        assert_eq!(kinds(&h), [AnomalyKind::ServerTimings]);
    }
}
