// Command quickstart is the whole round trip against a running ax server,
// with the Go client (openapi/client) and the webhook verifier
// (openapi/receiver): it starts a webhook receiver, creates an endpoint
// pointing at it and a task that fires every second, verifies two signed
// deliveries with the endpoint's secret, lists the task's executions, then
// pauses and deletes the task and deletes the endpoint.
//
//	AX_URL=http://localhost:8080 AX_TOKEN=... go run ./openapi/client/examples/quickstart
//
// The token needs the scopes tasks:read tasks:write endpoints:read
// endpoints:write executions:read. The receiver listens on 127.0.0.1, a
// private address: the server must run with AX_ALLOW_PRIVATE_TARGETS=true.
// Any failure ends the program with exit status 1.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/axhq/ax/openapi/client"
	"github.com/axhq/ax/openapi/receiver"
)

func main() {
	log.SetFlags(0)
	if err := run(envOr("AX_URL", "http://localhost:8080"), os.Getenv("AX_TOKEN")); err != nil {
		log.Printf("quickstart failed: %v", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// delivery is a webhook the receiver verified.
type delivery struct {
	id   string
	body []byte
}

// hookReceiver answers ax's webhooks. Its verifier is set once the endpoint,
// and so its secret, exists; a delivery that does not verify is answered
// 401 and reported on failed.
type hookReceiver struct {
	verifier  atomic.Pointer[receiver.Verifier]
	delivered chan delivery
	failed    chan error
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // the raw body: the signature covers its bytes
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	v := h.verifier.Load()
	if v == nil {
		http.Error(w, "no endpoint yet", http.StatusServiceUnavailable)
		return
	}
	if err := v.Verify(r.Header, body); err != nil {
		select {
		case h.failed <- fmt.Errorf("delivery %s: %w", r.Header.Get(receiver.HeaderID), err):
		default:
		}
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	select {
	case h.delivered <- delivery{id: r.Header.Get(receiver.HeaderID), body: body}:
	default: // more than the example waits for
	}
	w.WriteHeader(http.StatusNoContent)
}

func run(baseURL, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ax, err := client.New(baseURL, token)
	if err != nil {
		return err
	}

	// The receiver, on a free port of the loopback interface.
	hooks := &hookReceiver{
		delivered: make(chan delivery, 2),
		failed:    make(chan error, 1),
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: hooks, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	hookURL := "http://" + ln.Addr().String() + "/hooks/ax"
	fmt.Println("receiver listening on", hookURL)

	key := client.NewIdempotencyKey()
	ep, err := ax.CreateEndpointWithResponse(ctx, &client.CreateEndpointParams{IdempotencyKey: &key},
		client.EndpointRequest{Name: "e2e-receiver", Url: hookURL})
	if err == nil {
		err = client.Check(ep.HTTPResponse, ep.Body)
	}
	if err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	endpoint := ep.JSON201
	// The secret is shown once, in this answer: a real receiver stores it now.
	verifier, err := receiver.NewVerifier([]string{endpoint.Secret})
	if err != nil {
		return err
	}
	hooks.verifier.Store(verifier)
	fmt.Println("endpoint created", endpoint.Id)

	var schedule client.Schedule
	if err := schedule.FromIntervalSchedule(client.IntervalSchedule{IntervalSeconds: 1}); err != nil {
		return err
	}
	key = client.NewIdempotencyKey()
	tr, err := ax.CreateTaskWithResponse(ctx, &client.CreateTaskParams{IdempotencyKey: &key}, client.TaskRequest{
		Name:       "e2e.every-second",
		EndpointId: endpoint.Id,
		Schedule:   schedule,
		Payload:    map[string]any{"order": 42},
	})
	if err == nil {
		err = client.Check(tr.HTTPResponse, tr.Body)
	}
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	task := tr.JSON201
	fmt.Println("task created", task.Id)

	wait := time.NewTimer(30 * time.Second)
	defer wait.Stop()
	for i := 1; i <= 2; i++ {
		select {
		case d := <-hooks.delivered:
			fmt.Printf("verified delivery %d %s %s\n", i, d.id, d.body)
		case err := <-hooks.failed:
			return err
		case <-wait.C:
			return fmt.Errorf("%d of 2 deliveries within 30s", i-1)
		}
	}

	// ax queues upcoming slots ahead as pending executions: Until now lists
	// only those already due, the delivered ones among them (newest first).
	now := time.Now()
	n := 0
	for x, err := range ax.AllExecutions(ctx, client.ListExecutionsParams{TaskId: &task.Id, Until: &now}) {
		if err != nil {
			return fmt.Errorf("list executions: %w", err)
		}
		n++
		fmt.Println("execution", x.Id, x.State, x.ScheduledFor.Format(time.RFC3339))
	}
	fmt.Println("executions", n)

	pr, err := ax.PauseTaskWithResponse(ctx, task.Id)
	if err == nil {
		err = client.Check(pr.HTTPResponse, pr.Body)
	}
	if err != nil {
		return fmt.Errorf("pause task: %w", err)
	}
	fmt.Println("task paused", pr.JSON200.Id)

	dt, err := ax.DeleteTaskWithResponse(ctx, task.Id)
	if err == nil {
		err = client.Check(dt.HTTPResponse, dt.Body)
	}
	if err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	fmt.Println("task deleted", task.Id)

	// An endpoint is deleted once no task uses it (409 before).
	de, err := ax.DeleteEndpointWithResponse(ctx, endpoint.Id)
	if err == nil {
		err = client.Check(de.HTTPResponse, de.Body)
	}
	if err != nil {
		return fmt.Errorf("delete endpoint: %w", err)
	}
	fmt.Println("endpoint deleted", endpoint.Id)
	return nil
}
