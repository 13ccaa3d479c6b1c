package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// recordFile is the state directory's log of successes, one JSON object
// per line.
const recordFile = "succeeded.jsonl"

// record is one success.
type record struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Output Output    `json:"output"`
}

// records remembers the webhook-ids that succeeded within the retention,
// with their output; with a directory, on disk too.
type records struct {
	mu        sync.Mutex
	retention time.Duration
	now       func() time.Time
	byID      map[string]record
	path      string
	file      *os.File // nil without a state directory
	appended  int      // lines in the file; past twice the kept ones, it is rewritten
	sweep     time.Time
}

// openRecords loads dir's log (keeping what the retention still covers,
// rewritten compactly) or, with dir "", remembers in memory only.
func openRecords(dir string, retention time.Duration, now func() time.Time) (*records, error) {
	rs := &records{retention: retention, now: now, byID: make(map[string]record)}
	if dir == "" {
		return rs, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, recordFile)
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec record
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.ID != "" && now().Sub(rec.At) < retention {
				rs.byID[rec.ID] = rec
			}
		}
		err := sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	rs.path = path
	if err := rs.rewrite(); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return rs, nil
}

// rewrite replaces the log by the records kept, then appends from there.
func (rs *records) rewrite() error {
	if rs.file != nil {
		_ = rs.file.Close()
		rs.file = nil
	}
	tmp := rs.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, rec := range rs.byID {
		b, _ := json.Marshal(rec)
		_, _ = w.Write(append(b, '\n'))
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, rs.path)
	}
	if err != nil {
		return err
	}
	rs.appended = len(rs.byID)
	rs.file, err = os.OpenFile(rs.path, os.O_APPEND|os.O_WRONLY, 0o600)
	return err
}

// succeeded returns id's output when it succeeded within the retention.
func (rs *records) succeeded(id string) (Output, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rec, ok := rs.byID[id]
	if !ok || rs.now().Sub(rec.At) >= rs.retention {
		return Output{}, false
	}
	return rec.Output, true
}

// add records a success (synced to disk before it returns, with a state
// directory).
func (rs *records) add(id string, out Output) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := rs.now()
	rec := record{ID: id, At: now, Output: out}
	rs.byID[id] = rec
	if !now.Before(rs.sweep) {
		for k, r := range rs.byID {
			if now.Sub(r.At) >= rs.retention {
				delete(rs.byID, k)
			}
		}
		rs.sweep = now.Add(rs.retention / 24)
	}
	if rs.path == "" {
		return nil
	}
	if rs.appended > 1000 && rs.appended > 2*len(rs.byID) {
		return rs.rewrite()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := rs.file.Write(append(b, '\n')); err != nil {
		return err
	}
	rs.appended++
	return rs.file.Sync()
}

// close closes the log.
func (rs *records) close() error {
	if rs.file == nil {
		return nil
	}
	return rs.file.Close()
}
