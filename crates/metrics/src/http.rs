//! TTFT and E2E over HTTP, explained by the engine's own stamps.
//!
//! With goodput's server in the same process (`--target http-local`), the client's stamps and
//! the server's share one clock, and a request's time to first token splits exactly into:
//!
//! ```text
//! ttft = send_lag        sent − intended                     (the load generator)
//!      + request_path    server received − sent              (connect, send, HTTP parsing)
//!      + tokenize        engine arrival − server received    (JSON, chat template, tokenizer, admission)
//!      + handoff         queued − engine arrival             (the engine thread picks it up)
//!      + queue           first_scheduled − queued            (engine: waiting)
//!      + prefill         first_token − first_scheduled       (engine: prompt computation)
//!      + hold            first_text − first_token            (first tokens not yet a whole character)
//!      + response_path   client first content − first_text   (detokenize, SSE, transfer, client parsing)
//!      + unexplained     the rest: 0 on one clock when every stamp is there
//! ```
//!
//! Against a server in another process the two clocks differ: `request_path`,
//! `response_path` and `unexplained` are then unknown, and `beyond_engine` (a difference of
//! durations, each on its own clock) is what HTTP added.
//!
//! `beyond_engine` = ttft − (handoff + queue + prefill + hold): everything the HTTP layer adds
//! to what the engine did (the handoff is the engine's: a request that arrives mid-step waits
//! for the step to end, in-process as much as over HTTP). E2E adds `decode` (last token − first
//! token, engine) and `stream_tail` (client end − last token); `e2e_beyond_engine` = e2e −
//! (handoff + queue + prefill + decode) is what HTTP added to the request's end.
//!
//! Stamps out of their order (a server's bug, or a hostile one) would make negative parts: a
//! request whose engine stamps are not in order has no decomposition ([`stamps_in_order`]),
//! and is counted in [`Breakdown::refused_stamps`]. The figures the client refused when the
//! request came in are counted by [`anomalies`].

use crate::stats::Summary;
use goodput_core::{AnomalyKind, ClientRecord, ServerTimings};
use serde::{Deserialize, Serialize};

/// Whether a request's engine stamps are in the order the engine makes them: received ≤
/// arrival ≤ queued ≤ first scheduled ≤ first token ≤ first text ≤ last token ≤ finished
/// (absent stamps skipped). Only then are its parts durations.
pub fn stamps_in_order(t: &ServerTimings) -> bool {
    t.out_of_order().is_none()
}

/// One request's TTFT and E2E parts, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Parts {
    pub ttft: f64,
    pub send_lag: f64,
    pub tokenize: f64,
    pub handoff: f64,
    pub queue: f64,
    pub prefill: f64,
    pub hold: f64,
    /// On one clock only: `(request_path, response_path, unexplained)`.
    pub cross: Option<(f64, f64, f64)>,
    pub beyond_engine: f64,
    pub e2e: f64,
    pub decode: f64,
    pub stream_tail: f64,
    /// e2e − (handoff + queue + prefill + decode): the time outside the engine by the end.
    pub e2e_beyond_engine: f64,
}

/// The parts of `r`, when it came over HTTP from goodput's server and produced a token.
pub fn parts(r: &ClientRecord) -> Option<Parts> {
    let h = r.http.as_ref()?;
    let t = h.server.as_ref().filter(|t| stamps_in_order(t))?;
    let first = r.first_token()?;
    let (fs, ft, lt) = (t.first_scheduled?, t.first_token?, t.last_token?);
    let ttft = first.secs_since(r.intended);
    let send_lag = r.sent.secs_since(r.intended);
    let request_path = t.received.secs_since(r.sent);
    let tokenize = t.arrival.secs_since(t.received);
    let handoff = t.queued.secs_since(t.arrival);
    let queue = fs.secs_since(t.queued);
    let prefill = ft.secs_since(fs);
    let text_at = t.first_text.unwrap_or(ft);
    let hold = text_at.secs_since(ft);
    let response_path = first.secs_since(text_at);
    let (e2e, decode) = (r.end.secs_since(r.intended), lt.secs_since(ft));
    let explained = send_lag + request_path + tokenize + handoff + queue + prefill + hold + response_path;
    Some(Parts {
        ttft,
        send_lag,
        tokenize,
        handoff,
        queue,
        prefill,
        hold,
        cross: h.same_clock.then_some((request_path, response_path, ttft - explained)),
        beyond_engine: ttft - handoff - queue - prefill - hold,
        e2e,
        decode,
        stream_tail: if h.same_clock { r.end.secs_since(lt) } else { f64::NAN },
        e2e_beyond_engine: e2e - handoff - queue - prefill - decode,
    })
}

/// A request's time outside its engine, in the form a simulator of the engine alone adds it
/// to each simulated request (`plan --request-overhead RUN`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outside {
    /// Seconds by which the client's first content trails the token the server released it
    /// at: `beyond_engine` of [`parts`] (the load generator, the HTTP hops, a router's too,
    /// the server's parsing and tokenization, the way back), plus the hold when it waited for
    /// no further token (a server's processing of a whole first character).
    pub to_first_s: f64,
    /// The first text's hold in tokens: the tokens after the first that the server waited
    /// for before it had a whole character to send (tiny's byte tokens; none with a real
    /// model's). The hold's seconds over the request's own mean inter-token interval,
    /// `decode ÷ (generated − 1)`, rounded, at most `generated − 1`: under another load those
    /// tokens take another time, so a simulator counts them in its own steps.
    pub hold_tokens: u32,
    /// Seconds by which the client's end trails the engine's last token:
    /// `e2e_beyond_engine` of [`parts`].
    pub to_end_s: f64,
}

/// `r`'s [`Outside`]: each part a difference of durations, so it holds across the client's
/// and the server's clocks. `None` for a request without goodput's server stamps, failed, or
/// without a token.
pub fn outside_engine(r: &ClientRecord) -> Option<Outside> {
    if !r.is_ok() {
        return None;
    }
    let p = parts(r)?;
    let generated = r.http.as_ref()?.server.as_ref()?.generated_tokens;
    let interval = (generated > 1 && p.decode > 0.0).then(|| p.decode / (generated - 1) as f64);
    let hold_tokens = interval.map_or(0.0, |i| (p.hold / i).round().clamp(0.0, (generated - 1) as f64)) as u32;
    let to_first_s = p.beyond_engine + if hold_tokens == 0 { p.hold } else { 0.0 };
    Some(Outside { to_first_s, hold_tokens, to_end_s: p.e2e_beyond_engine })
}

/// A level's decomposition: each part over the requests that have one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    pub n: usize,
    pub ttft: Option<Summary>,
    pub send_lag: Option<Summary>,
    pub request_path: Option<Summary>,
    pub tokenize: Option<Summary>,
    pub handoff: Option<Summary>,
    pub queue: Option<Summary>,
    pub prefill: Option<Summary>,
    pub hold: Option<Summary>,
    pub response_path: Option<Summary>,
    pub unexplained: Option<Summary>,
    pub beyond_engine: Option<Summary>,
    pub e2e: Option<Summary>,
    pub decode: Option<Summary>,
    pub stream_tail: Option<Summary>,
    /// Requests whose `usage` token count was checked against the client's tokenizer, and
    /// those where the two disagree.
    pub usage_checked: usize,
    pub usage_mismatches: usize,
    /// Requests whose engine stamps were out of order ([`stamps_in_order`]): no decomposition.
    #[serde(default)]
    pub refused_stamps: usize,
}

/// The breakdown of `records` (`None` when none came over HTTP).
pub fn breakdown(records: &[&ClientRecord]) -> Option<Breakdown> {
    let http: Vec<&&ClientRecord> = records.iter().filter(|r| r.http.is_some()).collect();
    if http.is_empty() {
        return None;
    }
    let p: Vec<Parts> = http.iter().filter_map(|r| parts(r)).collect();
    let s = |f: fn(&Parts) -> f64| Summary::of(&p.iter().map(f).filter(|x| x.is_finite()).collect::<Vec<_>>());
    let c = |f: fn(&(f64, f64, f64)) -> f64| {
        Summary::of(&p.iter().filter_map(|x| x.cross.as_ref()).map(f).collect::<Vec<_>>())
    };
    let checked: Vec<(usize, usize)> = http
        .iter()
        .filter_map(|r| {
            let h = r.http.as_ref()?;
            Some((h.usage_completion_tokens?, h.client_counted_tokens?))
        })
        .collect();
    Some(Breakdown {
        n: p.len(),
        ttft: s(|x| x.ttft),
        send_lag: s(|x| x.send_lag),
        request_path: c(|x| x.0),
        tokenize: s(|x| x.tokenize),
        handoff: s(|x| x.handoff),
        queue: s(|x| x.queue),
        prefill: s(|x| x.prefill),
        hold: s(|x| x.hold),
        response_path: c(|x| x.1),
        unexplained: c(|x| x.2),
        beyond_engine: s(|x| x.beyond_engine),
        e2e: s(|x| x.e2e),
        decode: s(|x| x.decode),
        stream_tail: s(|x| x.stream_tail),
        usage_checked: checked.len(),
        usage_mismatches: checked.iter().filter(|(u, c)| u != c).count(),
        refused_stamps: http
            .iter()
            .filter_map(|r| r.http.as_ref()?.server.as_ref())
            .filter(|t| !stamps_in_order(t))
            .count(),
    })
}

/// How many requests had one kind of server figure refused, with the first one's message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnomalyCount {
    pub kind: AnomalyKind,
    pub count: usize,
    pub example: String,
}

/// `server_anomalies`: the requests whose server-reported figures the client refused when
/// they came in (`HttpStamps::anomalies`: counts beyond the stream, the prompt or
/// `max_tokens`, cached tokens above the prompt, stamps out of order), counted by kind (a
/// request once per kind), most frequent first, ties by kind.
pub fn anomalies(records: &[&ClientRecord]) -> Vec<AnomalyCount> {
    // Each kind once per request.
    let each = records.iter().filter_map(|r| r.http.as_ref()).flat_map(|h| {
        let mut seen: Vec<AnomalyKind> = Vec::new();
        h.anomalies
            .iter()
            .filter(|a| {
                let new = !seen.contains(&a.kind);
                seen.push(a.kind);
                new
            })
            .map(|a| (a.kind, 1, a.message.clone()))
            .collect::<Vec<_>>()
    });
    crate::stats::tally(each).into_iter().map(|(kind, count, example)| AnomalyCount { kind, count, example }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Chunk, FinishReason, HttpStamps, Outcome, ServerTimings, Stamp};

    fn us(x: u64) -> Stamp {
        Stamp(x * 1_000)
    }

    #[test]
    fn hand_computed_decomposition() {
        // intended 0, sent 100 µs, received 400, arrival 900, queued 950, first scheduled 3950,
        // first token 23950, first whole character 24150, client first content 24450; last
        // token 63950, client end 64150.
        let server = ServerTimings {
            received: us(400),
            arrival: us(900),
            queued: us(950),
            first_scheduled: Some(us(3950)),
            first_token: Some(us(23950)),
            first_text: Some(us(24150)),
            last_token: Some(us(63950)),
            finished: us(63960),
            prompt_tokens: 10,
            cached_tokens: 0,
            generated_tokens: 5,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        };
        let mut r = ClientRecord::unanswered(1, us(0), 10, us(64150), Outcome::Ok);
        r.sent = us(100);
        r.chunks = vec![Chunk { at: us(24450), tokens: 1 }];
        r.http = Some(HttpStamps {
            same_clock: true,
            server: Some(server),
            usage_completion_tokens: Some(5),
            client_counted_tokens: Some(4),
            ..Default::default()
        });
        let p = parts(&r).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(p.ttft, 0.02445));
        assert!(close(p.send_lag, 0.0001));
        let (request_path, response_path, unexplained) = p.cross.unwrap();
        assert!(close(request_path, 0.0003));
        assert!(close(p.tokenize, 0.0005));
        assert!(close(p.handoff, 0.00005));
        assert!(close(p.queue, 0.003));
        assert!(close(p.prefill, 0.020));
        assert!(close(p.hold, 0.0002));
        assert!(close(response_path, 0.0003));
        assert!(unexplained.abs() < 1e-12, "one clock: nothing unexplained");
        // Beyond the engine: 24.45 − 0.05 − 3 − 20 − 0.2 = 1.2 ms.
        assert!(close(p.beyond_engine, 0.0012));
        assert!(close(p.decode, 0.040));
        assert!(close(p.stream_tail, 0.0002));
        // By the end: 64.15 − 0.05 − 3 − 20 − 40 = 1.1 ms (send lag 0.1, request path 0.3,
        // tokenize 0.5, stream tail 0.2).
        assert!(close(p.e2e_beyond_engine, 0.0011));
        // The client saw the first text 1.2 + 0.2 (the hold, shorter than a token's 10 ms:
        // no token waited for) = 1.4 ms after the engine's first token, counting the way in;
        // the end 1.1 ms after the last token.
        let o = outside_engine(&r).unwrap();
        assert!(close(o.to_first_s, 0.0014) && o.hold_tokens == 0 && close(o.to_end_s, 0.0011), "{o:?}");
        // A first character whole only 21 ms after the first token (first text 44 950 µs,
        // client content 45 250): 2.1 of the request's 10 ms intervals, so 2 tokens held; the
        // hops stay 45.25 − 0.05 − 3 − 20 − 21 = 1.2 ms.
        let mut held = r.clone();
        held.http.as_mut().unwrap().server.as_mut().unwrap().first_text = Some(us(44950));
        held.chunks = vec![Chunk { at: us(45250), tokens: 3 }];
        let o = outside_engine(&held).unwrap();
        assert!(close(o.to_first_s, 0.0012) && o.hold_tokens == 2 && close(o.to_end_s, 0.0011), "{o:?}");
        let b = breakdown(&[&r]).unwrap();
        assert_eq!((b.n, b.usage_checked, b.usage_mismatches), (1, 1, 1));
        // Another process's clock: the cross-clock parts are unknown, the rest stands.
        r.http.as_mut().unwrap().same_clock = false;
        let p = parts(&r).unwrap();
        assert!(p.cross.is_none() && close(p.beyond_engine, 0.0012));
        assert!(close(outside_engine(&r).unwrap().to_end_s, 0.0011), "durations hold across clocks");
        let mut late = r.clone();
        late.outcome = Outcome::Timeout;
        assert!(outside_engine(&late).is_none(), "a failed request has no time outside to offer");
        let b = breakdown(&[&r]).unwrap();
        assert!(b.request_path.is_none() && b.beyond_engine.is_some() && b.stream_tail.is_none());
        // Not over HTTP: no breakdown.
        let plain = ClientRecord::unanswered(2, us(0), 10, us(10), Outcome::Ok);
        assert!(breakdown(&[&plain]).is_none());
    }

    #[test]
    fn stamps_out_of_order_give_no_parts_and_are_counted() {
        // first_scheduled (25 µs) before queued (30 µs) would be a queue time of −5 µs.
        let server = ServerTimings {
            received: us(10),
            arrival: us(20),
            queued: us(30),
            first_scheduled: Some(us(25)),
            first_token: Some(us(50)),
            first_text: None,
            last_token: Some(us(90)),
            finished: us(95),
            prompt_tokens: 10,
            cached_tokens: 0,
            generated_tokens: 2,
            preemptions: 0,
            finish_reason: FinishReason::Length,
        };
        assert!(!stamps_in_order(&server));
        let mut r = ClientRecord::unanswered(1, us(0), 10, us(100), Outcome::Ok);
        r.chunks = vec![Chunk { at: us(60), tokens: 1 }, Chunk { at: us(99), tokens: 1 }];
        r.http = Some(HttpStamps { server: Some(server.clone()), ..Default::default() });
        assert_eq!(parts(&r), None);
        let b = breakdown(&[&r]).unwrap();
        assert_eq!((b.n, b.refused_stamps, b.queue.is_none()), (0, 1, true));
        // In order (first scheduled at 40 µs): parts again, queue 10 µs.
        r.http.as_mut().unwrap().server = Some(ServerTimings { first_scheduled: Some(us(40)), ..server });
        let p = parts(&r).unwrap();
        assert!((p.queue - 0.00001).abs() < 1e-12);
        assert_eq!(breakdown(&[&r]).unwrap().refused_stamps, 0);
    }

    #[test]
    fn anomalies_are_counted_once_per_request_and_kind() {
        use goodput_core::{Anomaly, AnomalyKind as K};
        let with = |id, kinds: &[(K, &str)]| {
            let mut r = ClientRecord::unanswered(id, us(0), 10, us(10), Outcome::Ok);
            let anomalies = kinds.iter().map(|(kind, m)| Anomaly { kind: *kind, message: m.to_string() }).collect();
            r.http = Some(HttpStamps { anomalies, ..Default::default() });
            r
        };
        let a =
            with(1, &[(K::CompletionTokens, "usage 10^15"), (K::OverMaxTokens, "over"), (K::CompletionTokens, "x")]);
        let b = with(2, &[(K::CompletionTokens, "usage 0")]);
        let c = with(3, &[]);
        let plain = ClientRecord::unanswered(4, us(0), 10, us(10), Outcome::Ok);
        let got: Vec<(K, usize, String)> =
            anomalies(&[&a, &b, &c, &plain]).into_iter().map(|x| (x.kind, x.count, x.example)).collect();
        assert_eq!(got, [(K::CompletionTokens, 2, "usage 10^15".into()), (K::OverMaxTokens, 1, "over".into())]);
        assert!(anomalies(&[&c, &plain]).is_empty());
    }
}
