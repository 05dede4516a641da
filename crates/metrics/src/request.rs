//! Service-level metrics of one request, from the client's raw stamps (one monotonic clock).
//! `start` is the *intended* send time ([`ClientRecord::intended`]).

use goodput_core::ClientRecord;

/// `ttft` = first content token received − start, in seconds. Not the first byte, not a
/// role-only or empty chunk. `None` when no content arrived.
pub fn ttft(r: &ClientRecord) -> Option<f64> {
    Some(r.first_token()?.secs_since(r.intended))
}

/// The request's reasoning, when a reasoning model thought in it: aloud (reasoning chunks),
/// or hidden (OpenAI's o-series streams none, and only its usage counts reasoning tokens).
fn reasoning(r: &ClientRecord) -> Option<&goodput_core::Reasoning> {
    r.reasoning.as_ref().filter(|x| x.chunks > 0 || x.tokens.is_some_and(|t| t > 0))
}

/// `ttfo` = first *answer* token received − start, in seconds (AIPerf's time to first output
/// token): when a reasoning model's user sees the answer begin, after its reasoning tokens.
/// Equal to `ttft` for a stream without reasoning. `None` when no answer token arrived.
pub fn ttfo(r: &ClientRecord) -> Option<f64> {
    match reasoning(r) {
        None => ttft(r),
        Some(x) => Some(x.first_answer?.secs_since(r.intended)),
    }
}

/// `reasoning_time` = ttfo − ttft, in seconds: the reasoning phase, from the first reasoning
/// token to the first answer token. `None` for a request that did not reason, whose answer
/// never started, or whose reasoning was hidden (no reasoning chunk: its time is inside TTFT,
/// where nothing measures it apart).
pub fn reasoning_time(r: &ClientRecord) -> Option<f64> {
    reasoning(r).filter(|x| x.chunks > 0)?;
    Some(ttfo(r)? - ttft(r)?)
}

/// `reasoning_tokens`: the request's output tokens that were reasoning — the target's count
/// ([`goodput_core::Reasoning::tokens`]: the server's usage, checked, else the client's
/// tokenizer count, else the engine's), else the reasoning chunks streamed. `None` for a
/// request that did not reason.
pub fn reasoning_tokens(r: &ClientRecord) -> Option<usize> {
    let x = reasoning(r)?;
    // Reasoning is part of the output: a count above it is a miscount, held to the output.
    Some(x.tokens.unwrap_or(x.chunks).min(r.output_tokens))
}

/// `e2e` = end-of-stream marker received − start, in seconds (the seeds' FT). `None` unless
/// the request ended with its marker.
pub fn e2e(r: &ClientRecord) -> Option<f64> {
    r.is_ok().then(|| r.end.secs_since(r.intended))
}

/// `tpot` = (e2e − ttft) / (output_tokens − 1), in seconds per token (vLLM, SGLang, MLPerf
/// "TPOT"). Undefined (`None`) for fewer than 2 output tokens or an unfinished request.
pub fn tpot(r: &ClientRecord) -> Option<f64> {
    if r.output_tokens < 2 {
        return None;
    }
    Some((e2e(r)? - ttft(r)?) / (r.output_tokens - 1) as f64)
}

/// `itl`: every gap between consecutive content chunks, in seconds, with the number of tokens
/// the later chunk carried (a server that batches tokens into chunks shows few, long gaps).
pub fn itl(r: &ClientRecord) -> Vec<(f64, u32)> {
    r.chunks.windows(2).map(|w| (w[1].at.secs_since(w[0].at), w[1].tokens)).collect()
}

/// `ntpot` = e2e / output_tokens, in seconds per token (normalised time per output token).
pub fn ntpot(r: &ClientRecord) -> Option<f64> {
    if r.output_tokens == 0 {
        return None;
    }
    Some(e2e(r)? / r.output_tokens as f64)
}

/// `per_user_tps` = 1 / tpot, in tokens per second: one user's generation speed once tokens
/// flow. Per request; take percentiles over requests.
pub fn per_user_tps(r: &ClientRecord) -> Option<f64> {
    let t = tpot(r)?;
    (t > 0.0).then(|| 1.0 / t)
}

/// `token_arrivals`: when the request's `output_tokens` arrived, as (stamp, tokens): each
/// content chunk's stamp with its share of them (the chunks' own token counts scaled to the
/// counted total, which a server's usage may set); all at the end when nothing streamed.
/// What a throughput's interval counts over time blocks.
pub fn token_arrivals(r: &ClientRecord) -> Vec<(goodput_core::Stamp, f64)> {
    let streamed: u64 = r.chunks.iter().map(|c| u64::from(c.tokens)).sum();
    if streamed == 0 {
        return vec![(r.end, r.output_tokens as f64)];
    }
    let scale = r.output_tokens as f64 / streamed as f64;
    r.chunks.iter().map(|c| (c.at, f64::from(c.tokens) * scale)).collect()
}

/// Send lag = actual send − intended send, in seconds: how far the load generator fell
/// behind its schedule (it should stay near zero; see the harness warnings).
pub fn send_lag(r: &ClientRecord) -> f64 {
    r.sent.secs_since(r.intended)
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Outcome, RecordBuilder, Stamp};

    #[test]
    fn token_arrivals_share_the_counted_total_over_the_chunks() {
        // Chunks of 1 and 3 tokens, but usage counted 8: shares 2 and 6.
        let r = rec(&[(200, 1), (300, 3)], 400, 8);
        assert_eq!(token_arrivals(&r), vec![(ms(200), 2.0), (ms(300), 6.0)]);
        let none = rec(&[], 400, 5);
        assert_eq!(token_arrivals(&none), vec![(ms(400), 5.0)]);
    }

    fn ms(x: u64) -> Stamp {
        Stamp(x * 1_000_000)
    }

    fn rec(chunks: &[(u64, u32)], end: u64, out: usize) -> ClientRecord {
        RecordBuilder::new(0)
            .intended(ms(100))
            .sent(ms(103))
            .chunks(chunks.iter().map(|&(at, tokens)| (ms(at), tokens)))
            .end(ms(end))
            .input(10)
            .output(out)
            .build()
    }

    #[test]
    fn hand_computed_request_metrics() {
        // Intended at 100 ms; content at 350, 370, 420 (2 tokens), 430; end marker at 440 ms.
        let r = rec(&[(350, 1), (370, 1), (420, 2), (430, 1)], 440, 5);
        assert!((ttft(&r).unwrap() - 0.250).abs() < 1e-12);
        assert!((e2e(&r).unwrap() - 0.340).abs() < 1e-12);
        // (0.340 - 0.250) / (5 - 1) = 0.0225
        assert!((tpot(&r).unwrap() - 0.0225).abs() < 1e-12);
        assert!((per_user_tps(&r).unwrap() - 1.0 / 0.0225).abs() < 1e-9);
        // 0.340 / 5 = 0.068
        assert!((ntpot(&r).unwrap() - 0.068).abs() < 1e-12);
        let gaps = itl(&r);
        assert_eq!(gaps.len(), 3);
        assert!((gaps[1].0 - 0.050).abs() < 1e-12 && gaps[1].1 == 2);
        assert!((send_lag(&r) - 0.003).abs() < 1e-12);
    }

    #[test]
    fn undefined_cases() {
        let one = rec(&[(200, 1)], 210, 1);
        assert_eq!(tpot(&one), None);
        assert_eq!(per_user_tps(&one), None);
        assert!(ttft(&one).is_some());
        let none = rec(&[], 300, 0);
        assert_eq!(ttft(&none), None);
        assert_eq!(ntpot(&none), None);
        let mut failed = rec(&[(200, 1), (210, 1)], 220, 2);
        failed.outcome = Outcome::Timeout;
        assert_eq!(e2e(&failed), None);
        assert_eq!(tpot(&failed), None);
        assert!(ttft(&failed).is_some(), "a timed-out request may still have a TTFT");
    }
}
