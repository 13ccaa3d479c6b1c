package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// freeLoopbackAddr returns a loopback address no one listens on now, for
// ax's profiles (AX_DEBUG_ADDR).
func freeLoopbackAddr(ctx context.Context) (string, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("a port for ax's profiles: %w", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr, nil
}

// axProfilePath is where the scenario name's ax CPU profile goes: the
// -ax-cpuprofile path with the name before its extension.
func axProfilePath(path, name string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + name + ext
}

// profileAx starts taking ax's CPU profile for d (whole seconds, at least
// one) and returns a function that waits for it and writes it to the
// scenario's file. Without -ax-cpuprofile both do nothing.
func (s *session) profileAx(ctx context.Context, d time.Duration) func() {
	if s.st.o.axProfile == "" || s.ax.debugAddr == "" {
		return func() {}
	}
	secs := max(int(d.Round(time.Second)/time.Second), 1)
	path := axProfilePath(s.st.o.axProfile, s.name)
	done := make(chan error, 1)
	go func() {
		done <- fetchProfile(ctx, "http://"+s.ax.debugAddr+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), path)
	}()
	return func() {
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "bench: ax's CPU profile:", err)
			return
		}
		s.st.logf("%s: ax's CPU profile over %d s in %s", s.name, secs, path)
	}
}

// fetchProfile writes what url answers to path.
func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
