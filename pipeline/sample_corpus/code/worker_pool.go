// Command worker_pool processes file paths read from stdin with a bounded
// number of goroutines and reports per-file byte counts in input order.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
)

type result struct {
	index int
	path  string
	size  int64
	err   error
}

func measure(ctx context.Context, index int, path string) result {
	if err := ctx.Err(); err != nil {
		return result{index: index, path: path, err: err}
	}
	info, err := os.Stat(path)
	if err != nil {
		return result{index: index, path: path, err: err}
	}
	return result{index: index, path: path, size: info.Size()}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	const workers = 4
	jobs := make(chan [2]any)
	results := make(chan result)

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				results <- measure(ctx, job[0].(int), job[1].(string))
			}
		}()
	}

	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		i := 0
		for scanner.Scan() {
			jobs <- [2]any{i, scanner.Text()}
			i++
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()

	// Results arrive out of order; buffer them and print in input order.
	pending := map[int]result{}
	next, failed := 0, 0
	for r := range results {
		pending[r.index] = r
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if p.err != nil {
				failed++
				fmt.Fprintf(os.Stderr, "error\t%s\t%v\n", p.path, p.err)
				continue
			}
			fmt.Printf("%d\t%s\n", p.size, p.path)
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
