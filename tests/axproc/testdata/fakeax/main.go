// Command fakeax stands in for ax in axproc's own test: it prints ax's
// banner, writes a data race when FAKEAX_RACE is set, and exits 0 on
// SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	fmt.Println("ax is listening on http://127.0.0.1:1")
	if os.Getenv("FAKEAX_RACE") != "" {
		var n int
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { n++ })
		}
		wg.Wait()
		fmt.Fprintln(os.Stderr, "raced to", n)
	}
	fmt.Fprintln(os.Stderr, "fakeax: ready")
	<-stop
}
