//! [`RecordBuilder`]: a [`ClientRecord`] built by naming only the fields a case cares about,
//! for tests, test targets and simulated clients, instead of spelling out all sixteen.

use crate::client::{Chunk, ClientRecord, Outcome};
use crate::clock::Stamp;
use crate::http::HttpStamps;
use crate::request::EngineRecord;

/// Starts from a request that completed (`Outcome::Ok`) with every stamp at 0, no chunks, no
/// tokens and nothing optional; each method sets one thing.
#[derive(Clone, Debug)]
pub struct RecordBuilder(ClientRecord);

impl RecordBuilder {
    pub fn new(id: u64) -> Self {
        Self(ClientRecord::unanswered(id, Stamp(0), 0, Stamp(0), Outcome::Ok))
    }

    /// Due and sent at `at` (the sent stamp can be moved after with [`Self::sent`]).
    pub fn intended(mut self, at: Stamp) -> Self {
        self.0.intended = at;
        self.0.sent = at;
        self
    }

    pub fn sent(mut self, at: Stamp) -> Self {
        self.0.sent = at;
        self
    }

    /// The content chunks `(arrival, tokens)`; the output length becomes their tokens' sum
    /// (set it apart after with [`Self::output`]).
    pub fn chunks(mut self, chunks: impl IntoIterator<Item = (Stamp, u32)>) -> Self {
        self.0.chunks = chunks.into_iter().map(|(at, tokens)| Chunk { at, tokens }).collect();
        self.0.output_tokens = self.0.chunks.iter().map(|c| c.tokens as usize).sum();
        self
    }

    /// One token at each of `times`.
    pub fn tokens_at(self, times: impl IntoIterator<Item = Stamp>) -> Self {
        self.chunks(times.into_iter().map(|at| (at, 1)))
    }

    pub fn end(mut self, at: Stamp) -> Self {
        self.0.end = at;
        self
    }

    pub fn input(mut self, tokens: usize) -> Self {
        self.0.input_tokens = tokens;
        self
    }

    pub fn output(mut self, tokens: usize) -> Self {
        self.0.output_tokens = tokens;
        self
    }

    /// The output length the workload required ([`ClientRecord::required_output_tokens`]).
    pub fn required_output(mut self, tokens: usize) -> Self {
        self.0.required_output_tokens = Some(tokens);
        self
    }

    /// The prompt length the workload drew ([`ClientRecord::drawn_input_tokens`]).
    pub fn drawn_input(mut self, tokens: usize) -> Self {
        self.0.drawn_input_tokens = Some(tokens);
        self
    }

    pub fn outcome(mut self, outcome: Outcome) -> Self {
        self.0.outcome = outcome;
        self
    }

    pub fn engine(mut self, engine: EngineRecord) -> Self {
        self.0.engine = Some(engine);
        self
    }

    pub fn http(mut self, http: HttpStamps) -> Self {
        self.0.http = Some(http);
        self
    }

    pub fn reasoning(mut self, reasoning: crate::client::Reasoning) -> Self {
        self.0.reasoning = Some(reasoning);
        self
    }

    /// Multi-turn: the session and the 1-based turn.
    pub fn turn(mut self, session: u64, turn: u32) -> Self {
        self.0.session = Some(session);
        self.0.turn = Some(turn);
        self
    }

    pub fn build(self) -> ClientRecord {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_sets_its_field_and_chunks_give_the_output_length() {
        let r = RecordBuilder::new(7)
            .intended(Stamp(10))
            .sent(Stamp(12))
            .chunks([(Stamp(20), 1), (Stamp(30), 3)])
            .end(Stamp(40))
            .input(5)
            .turn(2, 3)
            .build();
        assert_eq!((r.id, r.intended, r.sent, r.end), (7, Stamp(10), Stamp(12), Stamp(40)));
        assert_eq!((r.input_tokens, r.output_tokens, r.chunks.len()), (5, 4, 2));
        assert_eq!((r.session, r.turn, r.is_ok()), (Some(2), Some(3), true));
        assert_eq!(RecordBuilder::new(1).tokens_at([Stamp(1), Stamp(2)]).output(9).build().output_tokens, 9);
    }
}
