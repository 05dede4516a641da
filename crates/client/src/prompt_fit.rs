//! A text prompt written to the length the server counts. A chat server counts its template
//! (and a server's tokenizer may count the written text differently from the client's), so a
//! scenario's 125-token prompt comes back as `usage.prompt_tokens` 180: the measured input is
//! not the scenario's. The fit learns, from the responses so far, the line
//! `usage.prompt_tokens = a + b × written` — `a` the template's tokens, `b` the server's tokens
//! per written token (1 with the model's own tokenizer) — and writes the length that lands on
//! the scenario's. Until a response has come, the prompt is written as the scenario says.
//! [`exact_text`] writes a number of tokens as text that the client's tokenizer counts back.

use goodput_core::{CodecError, TextCodec, TokenId};

/// Text that the codec encodes to exactly `ids.len()` tokens where it can: the ids decoded,
/// then trimmed or extended (from the ids again, by the ids-per-token seen so far) and decoded
/// anew until re-encoding gives the length, at most eight rounds (vLLM's random dataset does the same). Returns the text and
/// its length in tokens (the nearest reached, when not exact).
pub fn exact_text(codec: &dyn TextCodec, ids: &[TokenId]) -> Result<(String, usize), CodecError> {
    let want = ids.len();
    let mut cur = ids.to_vec();
    let mut best: Option<(String, usize)> = None;
    for _ in 0..8 {
        let text = codec.decode(&cur)?;
        let n = codec.encode(&text)?.len();
        if best.as_ref().is_none_or(|b| b.1.abs_diff(want) > n.abs_diff(want)) {
            best = Some((text, n));
        }
        // Ids per token of text so far (special ids decode to nothing, merges join ids).
        let per_token = (cur.len() as f64 / n.max(1) as f64).max(1.0);
        let ids_for = |tokens: usize| ((tokens as f64 * per_token).round() as usize).max(1);
        match n.cmp(&want) {
            std::cmp::Ordering::Equal => break,
            std::cmp::Ordering::Greater => cur.truncate(cur.len().saturating_sub(ids_for(n - want)).max(1)),
            std::cmp::Ordering::Less => cur.extend(ids.iter().cycle().skip(cur.len()).take(ids_for(want - n))),
        }
    }
    best.ok_or_else(|| CodecError::new("no text for an empty prompt"))
}

/// `(written, counted)` pairs and the line through them.
#[derive(Debug, Default)]
pub struct PromptFit {
    points: Vec<(f64, f64)>,
}

/// The most pairs kept: enough for the line, bounded for a long run.
pub const KEEP: usize = 256;

impl PromptFit {
    /// A response's pair: the tokens written (the client's count) and the server's count.
    pub fn add(&mut self, written: usize, counted: usize) {
        if self.points.len() < KEEP && written > 0 {
            self.points.push((written as f64, counted as f64));
        }
    }

    /// `(a, b)` of `counted = a + b × written`: least squares where the written lengths vary
    /// (and give a slope from 0.1 to 10), else `b = 1` and `a` the mean difference; `None`
    /// without a pair.
    pub fn line(&self) -> Option<(f64, f64)> {
        let n = self.points.len() as f64;
        if n == 0.0 {
            return None;
        }
        let (mx, my) = self.points.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
        let sxx: f64 = self.points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = self.points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let b = if sxx > 0.0 { sxy / sxx } else { f64::NAN };
        if b.is_finite() && (0.1..=10.0).contains(&b) {
            Some((my - b * mx, b))
        } else {
            Some((my - mx, 1.0))
        }
    }

    /// The tokens to write for the server to count `target`: `(target − a) ÷ b`, at least 1
    /// and at most 4 × `target`; `target` itself before any response.
    pub fn written_for(&self, target: usize) -> usize {
        let Some((a, b)) = self.line() else { return target };
        let w = ((target as f64 - a) / b).round();
        if w.is_finite() {
            (w.max(1.0) as usize).min(4 * target.max(1))
        } else {
            target
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_s_tokens_are_taken_off_and_a_tokenizer_s_rate_is_learnt() {
        let mut f = PromptFit::default();
        assert_eq!(f.written_for(125), 125, "nothing learnt: as the scenario says");
        // A chat template of 30 tokens on the model's own tokenizer, one length so far.
        f.add(200, 230);
        assert_eq!(f.line(), Some((30.0, 1.0)));
        assert_eq!(f.written_for(125), 95);
        // Lengths that vary: the line through (100, 130) and (200, 230) is the same.
        f.add(100, 130);
        assert_eq!(f.written_for(125), 95);
        // A server whose tokenizer counts a written token as 0.25 of its own, plus 20.
        let mut g = PromptFit::default();
        for w in [100, 200, 400] {
            g.add(w, 20 + w / 4);
        }
        let (a, b) = g.line().unwrap();
        assert!((a - 20.0).abs() < 1e-9 && (b - 0.25).abs() < 1e-9, "{a} {b}");
        assert_eq!(g.written_for(125), 420);
        // Bounded: never below 1 token, never beyond 4 × the target.
        assert_eq!(g.written_for(10), 1);
        let mut h = PromptFit::default();
        h.add(100, 10);
        h.add(200, 11);
        assert_eq!(h.written_for(50).min(200), h.written_for(50));
    }
}
