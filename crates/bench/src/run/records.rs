//! Requests written as they finish, off the load generator's thread: the workload's record
//! sink hands each finished record to a writer thread that appends it to `records.jsonl` and
//! `requests.csv` (oha's collector: workers send, one place writes), flushing whenever no
//! more are waiting. A killed run keeps every request that finished before it died. The
//! writer is the harness's bookkeeping: it runs where the harness is pinned, its CPU counts in
//! the process's, and the load generator's own cost per record is one copy of the record.

use super::error::{io, RunError};
use goodput_core::{ClientRecord, Phase};
use goodput_results::RecordLog;
use std::sync::Arc;
use std::thread::JoinHandle;

enum Msg {
    Record(f64, Phase, Arc<ClientRecord>),
    /// Answer once everything before has been written.
    Sync(flume::Sender<()>),
}

/// Hands records to the writer thread.
#[derive(Clone)]
pub struct RecordSender(flume::Sender<Msg>);

impl RecordSender {
    /// Queues `record` of `phase` at level `load` for the files.
    pub fn send(&self, load: f64, phase: Phase, record: Arc<ClientRecord>) {
        let _ = self.0.send(Msg::Record(load, phase, record));
    }
}

/// The thread that owns the record files.
pub struct RecordWriter {
    tx: flume::Sender<Msg>,
    thread: Option<JoinHandle<Result<(), goodput_results::ResultsError>>>,
}

impl RecordWriter {
    pub fn spawn(mut log: RecordLog) -> Result<Self, RunError> {
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
        });
        let thread = thread.map_err(io("starting the request-record writer"))?;
        Ok(RecordWriter { tx, thread: Some(thread) })
    }

    /// A sender to the writer thread (a level's record sink shares its copy of each record).
    pub fn sender(&self) -> RecordSender {
        RecordSender(self.tx.clone())
    }

    /// Waits until every record sent so far is on disk; the writer's error if it failed.
    pub fn sync(&mut self) -> Result<(), RunError> {
        let (done, wait) = flume::bounded(1);
        if self.tx.send(Msg::Sync(done)).is_ok() && wait.recv().is_ok() {
            return Ok(());
        }
        // The thread ended: it failed to write.
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => Err(RunError::Records(e)),
            _ => Err(RunError::RecordWriterStopped),
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
        let (_, log) = RunWriter::create(&dir, true).unwrap();
        let mut w = RecordWriter::spawn(log).unwrap();
        let sender = w.sender();
        let rec = |id| ClientRecord::unanswered(id, Stamp(id), 10, Stamp(id + 5), Outcome::Timeout);
        sender.send(4.0, Phase::Warmup, Arc::new(rec(1)));
        sender.send(4.0, Phase::Measured, Arc::new(rec(2)));
        w.sync().unwrap();
        let rows: Vec<RecordRow> = read_jsonl(&dir.join(RECORDS)).unwrap();
        let got: Vec<(f64, u64, Phase)> = rows.iter().map(|r| (r.level, r.record.id, r.phase)).collect();
        assert_eq!(got, [(4.0, 1, Phase::Warmup), (4.0, 2, Phase::Measured)]);
        assert_eq!(rows[1].record, rec(2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
