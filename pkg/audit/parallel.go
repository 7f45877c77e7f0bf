package audit

import (
	"bytes"
	"hash/maphash"
	"io"
)

// blockSize is the size of the blocks readBlocks cuts a log into (tests
// make it smaller).
var blockSize = 256 << 10

// block is a run of whole lines of a log, parsed by a worker and counted
// by the Analyzer in the log's order.
type block struct {
	buf  []byte // its storage, blockSize long (longer for a long line)
	data []byte // the lines, from buf; the last one lacks its newline only at the end of the log
	// tooLong: after data comes a line longer than maxLineBytes, not held.
	tooLong bool
	// err ends the log after this block (io.EOF at its end).
	err error

	// Parsed by a worker:
	arena   []byte
	recs    []rec // every line that is not blank, but only the first maxBadSamples bad ones
	lines   int   // lines in data (blank ones too) and the long one
	badRest int   // bad lines beyond the first maxBadSamples, only counted
	parsed  chan struct{}
}

// readBlocks is Read's parallel reader: this goroutine counts, one more
// reads and cuts the log into blocks at line ends (cut), workers parse
// the blocks' lines (block.parse: the scanner, timestamps, hashes:
// nearly all of the work), and the blocks come back here in their order
// to be counted (apply: the pending ring, the counters, the intervals),
// so that the report is what the sequential reader makes. The blocks in
// flight are at most 2×workers+2 (memory is bounded), and a block that
// grows for a line longer than blockSize is the only one in flight
// (cut).
func (a *Analyzer) readBlocks(name string, r io.Reader, workers int) error {
	n := 2*workers + 2
	free := make(chan *block, n)
	for i := 0; i < n; i++ {
		free <- &block{buf: make([]byte, blockSize), parsed: make(chan struct{}, 1)}
	}
	work := make(chan *block, n)
	order := make(chan *block, n)
	for w := 0; w < workers; w++ {
		go func() {
			var s scanner
			for b := range work {
				b.parse(&s, a.seed)
				b.parsed <- struct{}{}
			}
		}()
	}
	go func() {
		defer close(work)
		defer close(order)
		cut(r, free, n, func(b *block) {
			order <- b
			work <- b
		})
	}()
	lineNo := 0
	var err error
	for b := range order {
		<-b.parsed
		for i := range b.recs {
			rc := &b.recs[i]
			a.apply(name, lineNo+rc.n, rc)
		}
		a.lines += b.badRest
		a.bad += b.badRest
		lineNo += b.lines
		if b.err != nil {
			err = readError(name, lineNo, b.err)
		}
		b.recycle()
		free <- b
	}
	return err
}

// recycle empties b for the next lines, giving back what a long line
// made it hold.
func (b *block) recycle() {
	if len(b.buf) != blockSize {
		b.buf = make([]byte, blockSize)
	}
	if cap(b.arena) > 2*blockSize {
		b.arena = nil
	}
	if cap(b.recs) > blockSize/64 {
		b.recs = nil
	}
	b.data, b.tooLong, b.err = nil, false, nil
	for i := range b.recs {
		b.recs[i] = rec{} // let go of the lines' errors
	}
	b.recs = b.recs[:0]
}

// cut reads r into blocks from free (n in all) and hands each to out,
// cut after its last newline; the rest begins the next block. A line
// longer than a block is read into a block of its own that grows (up to
// maxLineBytes, then it is only counted as too long), after every other
// block has been counted (taken back from free), so that only one long
// block is ever in flight. The last block carries the error that ended
// the reading (io.EOF at the end).
func cut(r io.Reader, free chan *block, n int, out func(*block)) {
	var carry []byte // the start of the next block's first line
	for {
		b := <-free
		k := copy(b.buf, carry)
		m, err := fill(r, b.buf[k:])
		data := b.buf[:k+m]
		if err != nil {
			b.data, b.err = data, err
			out(b)
			return
		}
		if j := bytes.LastIndexByte(data, '\n'); j >= 0 {
			b.data, carry = data[:j+1], data[j+1:]
			out(b)
			continue
		}
		// A line longer than the block: wait until every other block
		// has been counted and read it whole.
		held := make([]*block, 0, n-1)
		for len(held) < n-1 {
			held = append(held, <-free)
		}
		carry, err = readLong(r, b, data, held[0].buf)
		out(b)
		for _, h := range held {
			free <- h
		}
		if err != nil {
			return
		}
	}
}

// readLong reads the rest of a line that begins with head (a full block
// without a newline) into b, through scratch, and returns what follows
// its newline (in scratch). A read error or the end of the log ends the
// line; it is also b.err.
func readLong(r io.Reader, b *block, head, scratch []byte) ([]byte, error) {
	line, size := head, len(head)
	if size > maxLineBytes {
		line, b.tooLong = nil, true
	}
	for {
		m, err := fill(r, scratch)
		chunk := scratch[:m]
		j := bytes.IndexByte(chunk, '\n')
		end := m
		if j >= 0 {
			end = j + 1
			size += j
		} else {
			size += m
		}
		if !b.tooLong && size > maxLineBytes {
			line, b.tooLong = nil, true
		}
		if !b.tooLong {
			line = append(line, chunk[:end]...)
		}
		if j >= 0 || err != nil {
			if !b.tooLong {
				b.buf, b.data = line[:cap(line)], line
			}
			if j < 0 {
				b.err = err
				return nil, err
			}
			return chunk[j+1:], nil
		}
	}
}

// fill reads r until p is full or r fails; the error is nil only when p
// is full.
func fill(r io.Reader, p []byte) (int, error) {
	n, empty := 0, 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
		if m > 0 {
			empty = 0
		} else if empty++; empty >= 100 {
			return n, io.ErrNoProgress
		}
	}
	return n, nil
}

// parse reads b's lines into recs with s, as the sequential reader's
// Analyzer.line does, each line numbered from the block's start.
func (b *block) parse(s *scanner, seed maphash.Seed) {
	s.arena = b.arena[:0]
	defer func() { b.arena = s.arena }() // grown, for the next lines
	b.lines, b.badRest = 0, 0
	bad := 0
	add := func(err error) {
		if bad++; bad > maxBadSamples {
			b.badRest++
			return
		}
		b.recs = append(b.recs, rec{n: b.lines, err: err})
	}
	for data := b.data; len(data) > 0; {
		line := data
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			line, data = data[:j], data[j+1:]
		} else {
			data = nil
		}
		b.lines++
		if len(line) > maxLineBytes {
			add(errTooLong())
			continue
		}
		line = trimEOL(line)
		if blank(line) {
			continue
		}
		b.recs = append(b.recs, rec{n: b.lines})
		rc := &b.recs[len(b.recs)-1]
		s.parseRec(seed, line, rc)
		if rc.err != nil {
			err := rc.err
			b.recs = b.recs[:len(b.recs)-1]
			add(err)
		}
	}
	if b.tooLong {
		b.lines++
		add(errTooLong())
	}
}
