//! Requests written as they finish, off the load generator's thread: the workload's record
//! sink hands each finished record to a writer thread that appends it to `records.jsonl` and
//! `requests.csv` (oha's collector: workers send, one place writes), flushing whenever no
//! more are waiting. A killed run keeps every request that finished before it died. The
//! writer is the harness's bookkeeping: it runs where the harness is pinned, its CPU counts in
//! the process's, and the load generator's own cost per record is one copy of the record.

use anyhow::{anyhow, Result};
use goodput_core::{ClientRecord, Phase};
use goodput_results::RecordLog;
use goodput_workload::RecordSink;
use std::thread::JoinHandle;

enum Msg {
    Record(f64, Phase, Box<ClientRecord>),
    /// Answer once everything before has been written.
    Sync(flume::Sender<()>),
}

/// The thread that owns the record files.
pub struct RecordWriter {
    tx: flume::Sender<Msg>,
    thread: Option<JoinHandle<Result<(), goodput_results::ResultsError>>>,
}

impl RecordWriter {
    pub fn spawn(mut log: RecordLog) -> Result<Self> {
        let (tx, rx) = flume::unbounded::<Msg>();
        let thread = std::thread::Builder::new().name("goodput-records".into()).spawn(move || {
            // Flush whenever nothing more is waiting: one write per burst of records rather than
            // per record, and nothing finished stays only in memory for long.
            while let Ok(msg) = rx.recv() {
                for msg in std::iter::once(msg).chain(rx.try_iter()) {
                    match msg {
                        Msg::Record(level, phase, r) => log.append(level, phase, &r)?,
                        Msg::Sync(done) => {
                            log.flush()?;
                            let _ = done.send(());
                        }
                    }
                }
                log.flush()?;
            }
            Ok(())
        })?;
        Ok(RecordWriter { tx, thread: Some(thread) })
    }

    /// The sink of a level at `load`: each finished record goes to the writer thread.
    pub fn sink(&self, load: f64) -> RecordSink {
        let tx = self.tx.clone();
        RecordSink::new(move |r: &ClientRecord, phase: Phase| {
            let _ = tx.send(Msg::Record(load, phase, Box::new(r.clone())));
        })
    }

    /// Waits until every record sent so far is on disk; the writer's error if it failed.
    pub fn sync(&mut self) -> Result<()> {
        let (done, wait) = flume::bounded(1);
        if self.tx.send(Msg::Sync(done)).is_ok() && wait.recv().is_ok() {
            return Ok(());
        }
        // The thread ended: it failed to write.
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => Err(anyhow::Error::new(e).context("writing the request records")),
            _ => Err(anyhow!("the request-record writer stopped")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_core::{Outcome, Stamp};
    use goodput_results::files::{read_jsonl, RECORDS};
    use goodput_results::{RecordRow, RunWriter};

    #[test]
    fn records_reach_the_file_by_the_time_sync_returns() {
        let dir = std::env::temp_dir().join(format!("goodput-records-{}", std::process::id()));
        let (_, log) = RunWriter::create(&dir).unwrap();
        let mut w = RecordWriter::spawn(log).unwrap();
        let sink = w.sink(4.0);
        let rec = |id| ClientRecord::unanswered(id, Stamp(id), 10, Stamp(id + 5), Outcome::Timeout);
        sink.report(&rec(1), Phase::Warmup);
        sink.report(&rec(2), Phase::Measured);
        w.sync().unwrap();
        let rows: Vec<RecordRow> = read_jsonl(&dir.join(RECORDS)).unwrap();
        let got: Vec<(f64, u64, Phase)> = rows.iter().map(|r| (r.level, r.record.id, r.phase)).collect();
        assert_eq!(got, [(4.0, 1, Phase::Warmup), (4.0, 2, Phase::Measured)]);
        assert_eq!(rows[1].record, rec(2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
