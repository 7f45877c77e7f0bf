package audit

import (
	"container/heap"
	"sort"
)

// topCounter counts request URIs: exactly while there are at most limit
// distinct ones, then with the Space-Saving algorithm (Metwally, Agrawal
// and El Abbadi, 2005) over limit counters, so that memory stays bounded
// whatever the log. Space-Saving finds every URI with more than
// total/limit requests and overstates a count by at most the count it
// took over (kept as the entry's err).
type topCounter struct {
	limit  int
	m      map[string]*topEntry
	h      topHeap // built when the limit is first reached
	approx bool
	maxErr int
}

type topEntry struct {
	key        string
	count, err int
	idx        int
}

func newTopCounter(limit int) *topCounter {
	return &topCounter{limit: limit, m: map[string]*topEntry{}}
}

func (c *topCounter) add(key []byte) {
	if e := c.m[string(key)]; e != nil {
		e.count++
		if c.approx {
			heap.Fix(&c.h, e.idx)
		}
		return
	}
	if len(c.m) < c.limit {
		c.m[string(key)] = &topEntry{key: string(key), count: 1}
		return
	}
	if !c.approx {
		c.approx = true
		c.h = make(topHeap, 0, len(c.m))
		for _, e := range c.m {
			c.h = append(c.h, e)
		}
		heap.Init(&c.h)
	}
	// Take over the smallest counter.
	e := c.h[0]
	delete(c.m, e.key)
	e.key, e.err = string(key), e.count
	e.count++
	if e.err > c.maxErr {
		c.maxErr = e.err
	}
	c.m[e.key] = e
	heap.Fix(&c.h, 0)
}

// top returns the n largest counts, most first, ties by key.
func (c *topCounter) top(n int) []URICount {
	all := make([]*topEntry, 0, len(c.m))
	for _, e := range c.m {
		all = append(all, e)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].count != all[j].count {
			return all[i].count > all[j].count
		}
		return all[i].key < all[j].key
	})
	if n >= 0 && len(all) > n {
		all = all[:n]
	}
	out := make([]URICount, len(all))
	for i, e := range all {
		out[i] = URICount{RequestURI: e.key, Count: e.count}
		if c.approx {
			out[i].MaxOvercount = e.err
		}
	}
	return out
}

type topHeap []*topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[i].count < h[j].count }
func (h topHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *topHeap) Push(x interface{}) {
	e := x.(*topEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *topHeap) Pop() interface{} {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// sampler keeps a uniform sample (reservoir sampling, Vitter's algorithm
// R) of at most sampleSize intervals, for their quantiles.
type sampler struct {
	n    int
	vals []int64
	rnd  uint64
}

const sampleSize = 512

func (s *sampler) add(v int64) {
	s.n++
	if len(s.vals) < sampleSize {
		s.vals = append(s.vals, v)
		return
	}
	// xorshift64*: deterministic, so a report is reproducible.
	if s.rnd == 0 {
		s.rnd = 0x9e3779b97f4a7c15
	}
	s.rnd ^= s.rnd >> 12
	s.rnd ^= s.rnd << 25
	s.rnd ^= s.rnd >> 27
	if j := (s.rnd * 2685821657736338717) % uint64(s.n); j < sampleSize {
		s.vals[j] = v
	}
}

// quantiles returns the given quantiles (0..1) of the sample, nearest
// rank; nil when the sample is empty.
func (s *sampler) quantiles(qs ...float64) []int64 {
	if len(s.vals) == 0 {
		return nil
	}
	v := append([]int64(nil), s.vals...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	out := make([]int64, len(qs))
	for i, q := range qs {
		k := int(q * float64(len(v)-1))
		out[i] = v[k]
	}
	return out
}
