package load

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A checkpoint file keeps, for each input, where the rows fully written
// end: the load goes on past it when run again with the same inputs. It is
// written (to a temporary file, synced, then renamed over the old) every
// checkpointEvery and when the load ends, and removed once every row is
// written.

const checkpointEvery = time.Second

type checkpointFile struct {
	Version  int              `json:"version"`
	StampNow bool             `json:"stampNow"`
	Inputs   []checkpointPart `json:"inputs"`
}

type checkpointPart struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"` // -1 for standard input
	ModTime time.Time `json:"modTime"`
	End     int64     `json:"end"`  // rows up to here are written (dataio.Pos.End)
	Done    bool      `json:"done"` // every row of the input is
}

// checkpoint is a leaf: its methods take its own lock alone.
type checkpoint struct {
	path  string
	mu    sync.Mutex // guards state, saved and last
	state checkpointFile
	saved bool // the file holds state
	last  time.Time
}

// openCheckpoint reads the checkpoint at path, which must be of these
// inputs, or starts one. path "": no file.
func openCheckpoint(path string, inputs []input, stampNow bool) (*checkpoint, error) {
	c := &checkpoint{path: path, state: checkpointFile{Version: 1, StampNow: stampNow}}
	for _, in := range inputs {
		c.state.Inputs = append(c.state.Inputs, checkpointPart{Name: in.name, Size: in.size, ModTime: in.mod.UTC()})
	}
	if path == "" {
		return c, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	var old checkpointFile
	if err := json.Unmarshal(b, &old); err != nil || old.Version != 1 {
		return nil, fmt.Errorf("--checkpoint %s: not a checkpoint of listgate load; remove it, or name another file", path)
	}
	if len(old.Inputs) != len(inputs) {
		return nil, fmt.Errorf("--checkpoint %s: of a load of %d inputs, not these %d; remove it to load these from the start", path, len(old.Inputs), len(inputs))
	}
	for i, p := range old.Inputs {
		in := c.state.Inputs[i]
		if p.Name != in.Name || p.Size != in.Size || !p.ModTime.Equal(in.ModTime) {
			return nil, fmt.Errorf("--checkpoint %s: of a load of %s (%d bytes, changed %s), not of %s as it is now; remove it to load from the start", path, p.Name, p.Size, p.ModTime.Format(time.RFC3339), in.Name)
		}
		c.state.Inputs[i].End, c.state.Inputs[i].Done = p.End, p.Done
	}
	c.saved = true
	return c, nil
}

func (c *checkpoint) end(i int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Inputs[i].End
}

func (c *checkpoint) done(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Inputs[i].Done
}

// resumed says whether the load goes on from an earlier run.
func (c *checkpoint) resumed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saved
}

// advance records that every row of input i up to end is written (and,
// with done, every row of it); it saves the file at most every
// checkpointEvery.
func (c *checkpoint) advance(i int, end int64, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.state.Inputs[i]
	p.End = max(p.End, end)
	p.Done = p.Done || done
	if time.Since(c.last) >= checkpointEvery {
		c.saveLocked()
	}
}

// save writes the checkpoint's file.
func (c *checkpoint) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saveLocked()
}

func (c *checkpoint) saveLocked() error {
	c.last = time.Now()
	if c.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("--checkpoint: %w", err)
	}
	c.saved = true
	return nil
}

// progressed says whether it records any row written or reported, by
// this run or an earlier one.
func (c *checkpoint) progressed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.state.Inputs {
		if p.End > 0 || p.Done {
			return true
		}
	}
	return false
}

// remove removes the file, once every row is written.
func (c *checkpoint) remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	return nil
}

// progressOf is where input i is, for the progress report.
func (c *checkpoint) progressOf(i int) (end int64, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Inputs[i].End, c.state.Inputs[i].Done
}
