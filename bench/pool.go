package bench

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"sync"
)

// poolFileMax bounds how many ids a pool file may bring.
const poolFileMax = 10_000_000

// loadPool reads the status pool from cfg.PoolFile: ids of orders that
// exist already, one per line.
func (r *run) loadPool() error {
	f, err := os.Open(r.cfg.PoolFile)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			r.pool = append(r.pool, id)
		}
		if len(r.pool) > poolFileMax {
			return errors.New("pool file has too many ids")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(r.pool) == 0 {
		return errors.New("pool file has no order ids")
	}
	return nil
}

// orderRecorder appends acknowledged order ids to a file.
type orderRecorder struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

func newOrderRecorder(path string) (*orderRecorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &orderRecorder{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (o *orderRecorder) add(id string) {
	o.mu.Lock()
	o.w.WriteString(id)
	o.w.WriteByte('\n')
	o.mu.Unlock()
}

func (o *orderRecorder) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Flush()
	o.f.Close()
}
