package api_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/openapi/client"
)

// specTransport sends a request and holds the exchange to the OpenAPI
// document, as the test client's do does.
type specTransport struct{ t *testing.T }

func (s specTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var sent []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		sent = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	checkAgainstSpec(s.t, specExchange{
		Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header, Body: sent,
		Status: res.StatusCode, RespHeader: res.Header, RespBody: raw,
	})
	return res, nil
}

// TestGeneratedGoClient drives the real API with the generated Go client
// (openapi/client): it creates an endpoint and a task, reads them back,
// pages through the tasks, replays a create by its idempotency key, and
// gets a refused request as a *client.ProblemError.
func TestGeneratedGoClient(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	ctx := t.Context()
	c, err := client.New(a.srv.URL, token(t, "acme"), client.WithHTTPClient(&http.Client{Transport: specTransport{t}}))
	require.NoError(t, err)

	key := client.NewIdempotencyKey()
	ep, err := c.CreateEndpointWithResponse(ctx, &client.CreateEndpointParams{IdempotencyKey: &key},
		client.EndpointRequest{Name: "billing", Url: "https://hooks.example.com/billing"})
	require.NoError(t, err)
	require.NoError(t, client.Check(ep.HTTPResponse, ep.Body))
	require.Equal(t, http.StatusCreated, ep.StatusCode())
	require.NotEmpty(t, ep.JSON201.Secret, "create shows the secret")

	again, err := c.CreateEndpointWithResponse(ctx, &client.CreateEndpointParams{IdempotencyKey: &key},
		client.EndpointRequest{Name: "billing", Url: "https://hooks.example.com/billing"})
	require.NoError(t, err)
	require.NoError(t, client.Check(again.HTTPResponse, again.Body))
	require.Equal(t, ep.JSON201.Id, again.JSON201.Id, "the same key replays the first create")

	tz, priority := "Asia/Shanghai", 1
	var created []string
	for _, name := range []string{"order.reconcile.daily", "订单.对账.每日", "report.weekly"} {
		// Schedule is a tagged union (oneOf on type): From… sets the type.
		var sched client.Schedule
		require.NoError(t, sched.FromCronSchedule(client.CronSchedule{Cron: "0 2 * * *", Timezone: &tz}))
		res, err := c.CreateTaskWithResponse(ctx, &client.CreateTaskParams{}, client.TaskRequest{
			Name: name, EndpointId: ep.JSON201.Id, Priority: &priority,
			Schedule: sched,
			Payload:  map[string]any{"shop": 42, "tags": []string{"a", "b"}},
		})
		require.NoError(t, err)
		require.NoError(t, client.Check(res.HTTPResponse, res.Body))
		created = append(created, res.JSON201.Id)
	}

	got, err := c.GetTaskWithResponse(ctx, created[1])
	require.NoError(t, err)
	require.NoError(t, client.Check(got.HTTPResponse, got.Body))
	require.Equal(t, "订单.对账.每日", got.JSON200.Name)
	require.Equal(t, ep.JSON201.Id, got.JSON200.EndpointId)
	require.Equal(t, 1, got.JSON200.Priority)
	require.NotNil(t, got.JSON200.NextRunAt, "an active cron task has a next fire")
	back, err := got.JSON200.Schedule.ValueByDiscriminator()
	require.NoError(t, err)
	require.IsType(t, client.CronSchedule{}, back, "the answer's schedule decodes as its type's variant")
	require.Equal(t, "0 2 * * *", back.(client.CronSchedule).Cron)
	require.Equal(t, map[string]any{"shop": float64(42), "tags": []any{"a", "b"}}, got.JSON200.Payload)

	limit := 1
	var listed []string
	for task, err := range c.AllTasks(ctx, client.ListTasksParams{Limit: &limit}) {
		require.NoError(t, err)
		listed = append(listed, task.Id)
	}
	require.ElementsMatch(t, created, listed, "one task per page, every page")

	paused, err := c.PauseTaskWithResponse(ctx, created[0])
	require.NoError(t, err)
	require.NoError(t, client.Check(paused.HTTPResponse, paused.Body))
	require.Nil(t, paused.JSON200.NextRunAt, "a paused task will not fire")

	missing, err := c.GetTaskWithResponse(ctx, "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e")
	require.NoError(t, err)
	var problem *client.ProblemError
	require.ErrorAs(t, client.Check(missing.HTTPResponse, missing.Body), &problem)
	require.Equal(t, http.StatusNotFound, problem.Status)

	var noInterval client.Schedule
	require.NoError(t, noInterval.FromIntervalSchedule(client.IntervalSchedule{}))
	bad, err := c.CreateTaskWithResponse(ctx, &client.CreateTaskParams{}, client.TaskRequest{
		Name: "bad.schedule", EndpointId: ep.JSON201.Id, Schedule: noInterval,
	})
	require.NoError(t, err)
	err = client.Check(bad.HTTPResponse, bad.Body)
	require.ErrorAs(t, err, &problem)
	require.Equal(t, http.StatusUnprocessableEntity, problem.Status)
	require.NotNil(t, problem.Problem.Errors)
	require.Contains(t, err.Error(), "schedule")
}
