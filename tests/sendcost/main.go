// Command sendcost measures the client CPU of one webhook request: ax's
// own send path (jobs.Sender: signing, the SSRF guard, its HTTP/1.1
// client for plain-http endpoints), net/http's transport alone, and
// fasthttp's client, each
// sending the same headers and body as a plain fire to a fasthttp
// receiver in a process of its own (so that the CPU this process uses is
// the client's). It is the measurement behind the send path's share of
// ax's CPU per delivery (docs/benchmarks.md):
//
//	go run ./tests/sendcost                 # the three, 200,000 requests each, 400 at once
//	go run ./tests/sendcost -modes ax -n 500000
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/axhq/ax/jobs"
)

func main() {
	serve := flag.String("serve", "", "internal: serve the receiver on this listener address")
	modes := flag.String("modes", "ax,nethttp,fasthttp", "comma-separated clients to measure: ax, nethttp, fasthttp")
	n := flag.Int("n", 200_000, "requests per client")
	c := flag.Int("c", 400, "requests in flight at once (ax's default send slots)")
	flag.Parse()
	if *serve != "" {
		if err := receive(*serve); err != nil {
			fmt.Fprintln(os.Stderr, "sendcost receiver:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(strings.Split(*modes, ","), *n, *c); err != nil {
		fmt.Fprintln(os.Stderr, "sendcost:", err)
		os.Exit(1)
	}
}

// receive answers every request 204 after reading the slot header, as a
// lean receiver would.
func receive(addr string) error {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	return fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
		_ = ctx.Request.Header.Peek("X-Ax-Scheduled-For")
		ctx.SetStatusCode(http.StatusNoContent)
	})
}

func run(modes []string, n, c int) error {
	recv := exec.CommandContext(context.Background(), os.Args[0], "-serve", "127.0.0.1:0") //nolint:gosec // this very binary, as the receiver
	out, err := recv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := recv.Start(); err != nil {
		return err
	}
	defer func() {
		_ = recv.Process.Kill()
		_ = recv.Wait()
	}()
	line := make([]byte, 64)
	k, err := out.Read(line)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	url := "http://" + strings.TrimSpace(string(line[:k])) + "/hook"
	body := bytes.Repeat([]byte("x"), 200)
	fmt.Printf("client CPU per request, %d requests, %d in flight, %d-byte body, to %s\n", n, c, len(body), url)
	for _, mode := range modes {
		send, err := client(mode, url, body, c)
		if err != nil {
			return err
		}
		measure(mode, send, n, c)
	}
	return nil
}

// fire's headers, as jobs.Sender sets them for a plain fire (the bare
// clients send these; ax's Sender computes its own).
var fire = [][2]string{
	{"Content-Type", "application/json"},
	{"Idempotency-Key", "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8e"},
	{"Webhook-Id", "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8e"},
	{"Webhook-Timestamp", "1764960000"},
	{"Webhook-Signature", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
	{"X-Ax-Execution-Id", "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8e"},
	{"X-Ax-Scheduled-For", "2026-12-05T20:00:00Z"},
	{"X-Ax-Round", "1"},
	{"X-Ax-Task-Id", "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8f"},
	{"X-Ax-Attempt", "1"},
	{"User-Agent", "ax"},
}

func client(mode, url string, body []byte, c int) (func() error, error) {
	switch mode {
	case "ax":
		// As many idle connections as requests in flight: the send path on
		// a warm pool, not the dials of ax's default 8 per host.
		s := jobs.NewSender(jobs.SenderConfig{AllowPrivateTargets: true, MaxIdleConnsPerHost: c})
		key := bytes.Repeat([]byte{7}, 32)
		slot := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
		return func() error {
			res := s.Send(context.Background(), jobs.Request{
				URL: url, Body: body, ExecutionID: "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8e",
				TaskID: "0192f0a8-7c1e-7b3a-9d2e-3f4a5b6c7d8f", ScheduledFor: slot, Round: 1, Attempt: 1, Keys: [][]byte{key},
			})
			if res.Err != nil {
				return res.Err
			}
			if res.StatusCode != http.StatusNoContent {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			return nil
		}, nil
	case "nethttp":
		tr := &http.Transport{MaxIdleConnsPerHost: c, MaxIdleConns: c}
		return func() error {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			for _, h := range fire {
				req.Header[h[0]] = []string{h[1]}
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			return resp.Body.Close()
		}, nil
	case "fasthttp":
		cl := &fasthttp.Client{MaxConnsPerHost: c, DisableHeaderNamesNormalizing: true}
		return func() error {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(url)
			req.Header.SetMethod(http.MethodPost)
			for _, h := range fire {
				req.Header.Set(h[0], h[1])
			}
			req.SetBodyRaw(body)
			return cl.DoTimeout(req, resp, 30*time.Second)
		}, nil
	}
	return nil, errors.New("unknown mode " + mode + " (want ax, nethttp or fasthttp)")
}

// measure sends n requests from c goroutines and prints the rate and the
// process's CPU (user + system) per request.
func measure(mode string, send func() error, n, c int) {
	var next, failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	t0, cpu0 := time.Now(), cpuUsed()
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := send(); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	elapsed, used := time.Since(t0), cpuUsed()-cpu0
	fmt.Printf("  %-9s %7.0f requests/s, %5.1f µs of client CPU a request, %d failed", mode, float64(n)/elapsed.Seconds(),
		float64(used.Nanoseconds())/1e3/float64(n), failed.Load())
	if e := first.Load(); e != nil {
		fmt.Printf(" (first: %s)", e)
	}
	fmt.Println()
}

func cpuUsed() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
