package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// BenchmarkApply100 applies a batch of 100 changed objects: validation, one
// bbolt transaction with its fsync, and the in-memory commit.
func BenchmarkApply100(b *testing.B) {
	db := openTemp(b)
	batch := make([]*config.Resource, 100)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		for j := range batch {
			batch[j] = destinationRule("bench", fmt.Sprint("r", j), fmt.Sprintf("h%d.example.com", i))
		}
		if _, err := db.Apply(ctx, batch); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/object")
}

// BenchmarkGet reads one object from a store of 10,000.
func BenchmarkGet(b *testing.B) {
	db := openTemp(b)
	const n = 10_000
	batch := make([]*config.Resource, 0, n)
	for i := range n {
		batch = append(batch, destinationRule(fmt.Sprint("ns", i%100), fmt.Sprint("r", i), "h.example.com"))
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	keys := make([]config.Key, 1024)
	for i := range keys {
		keys[i] = batch[(i*7919)%n].Key()
	}
	i := 0
	for b.Loop() {
		if _, ok := db.Get(keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
		i++
	}
}
