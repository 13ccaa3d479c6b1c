package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/axhq/ax/cmd/server/apply"
	"github.com/axhq/ax/openapi/client"
)

// clientConf is how a client command reaches the API: --url and --token,
// or AX_URL and AX_TOKEN.
type clientConf struct {
	url, token string
	getenv     func(string) string
}

func (cc *clientConf) flags(c *cobra.Command) {
	c.PersistentFlags().StringVar(&cc.url, "url", "", "the ax API's base URL (default $AX_URL)")
	c.PersistentFlags().StringVar(&cc.token, "token", "", "an API token (default $AX_TOKEN)")
}

func (cc *clientConf) client() (*client.ClientWithResponses, error) {
	url, token := cc.url, cc.token
	if url == "" {
		url = cc.getenv("AX_URL")
	}
	if token == "" {
		token = cc.getenv("AX_TOKEN")
	}
	switch {
	case url == "":
		return nil, errors.New("no API URL: set AX_URL or give --url (e.g. http://localhost:8080)")
	case !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://"):
		return nil, fmt.Errorf("the API URL %q is not an http(s) URL", url)
	case token == "":
		return nil, errors.New("no API token: set AX_TOKEN or give --token (ax token --tenant T prints one)")
	}
	return client.New(strings.TrimRight(url, "/"), token)
}

// addClientCommands adds apply, export, tasks, executions and workflows.
func addClientCommands(root *cobra.Command, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) {
	cc := &clientConf{getenv: getenv}
	var file string
	var opt apply.Options
	applyCmd := &cobra.Command{
		Use:   "apply -f PATH [--dry-run] [--prune] [--diff]",
		Short: "make the tenant's resources match YAML or JSON documents",
		Long: `Makes the tenant's endpoints, calendars, tasks and workflows match the
documents of PATH: a .yaml, .yml or .json file, a directory of them, or -
for stdin. Each document is

  kind: Task            # Endpoint, Calendar, Task or Workflow
  name: billing.daily
  spec:                 # the API's create body, references by name
    endpoint: billing   # (alert_endpoint, a node's endpoint, exclude_calendars)
    schedule: {type: cron, cron: "0 2 * * *", timezone: Europe/Paris}

apply creates what is missing, updates what differs (a field left out of a
document means the API's default) and leaves the rest, with one line per
resource. Every document is checked before anything is written: a bad one
changes nothing and is named with its file, position and field. --prune
deletes what an earlier apply created and the documents no longer hold
(tasks carry the label ax.dev/managed-by: apply; endpoints, calendars and
workflows are known by the audit log, so --prune needs audit:read for them).
An Endpoint's spec may carry a secret for its creation; it is never compared
or printed.

  ax import-crontab /etc/crontab --endpoint runner | ax apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("apply: -f PATH is required (- for stdin)")
			}
			docs, err := apply.Load(file, stdin)
			if err != nil {
				return fmt.Errorf("apply: nothing changed:\n%w", err)
			}
			api, err := cc.client()
			if err != nil {
				return err
			}
			sum, err := apply.Apply(c.Context(), api, docs, opt, stdout)
			var de apply.Errors
			if errors.As(err, &de) {
				return fmt.Errorf("apply: nothing changed:\n%w", err)
			}
			if err != nil {
				return problem(err)
			}
			verb := ""
			if opt.DryRun {
				verb = " (dry run: nothing changed)"
			}
			fmt.Fprintf(stderr, "%d created, %d updated, %d unchanged, %d deleted%s\n", sum.Created, sum.Updated, sum.Unchanged, sum.Deleted, verb)
			return nil
		},
	}
	applyCmd.Flags().StringVarP(&file, "file", "f", "", "a file or directory of documents, - for stdin")
	applyCmd.Flags().BoolVar(&opt.DryRun, "dry-run", false, "say what would change, change nothing")
	applyCmd.Flags().BoolVar(&opt.Prune, "prune", false, "delete what apply created earlier and the documents no longer hold")
	applyCmd.Flags().BoolVar(&opt.Diff, "diff", false, "show each updated field's value before and after (header values never)")
	applyCmd.Flags().IntVar(&opt.Workers, "workers", apply.WorkersDefault, "writes at once")
	cc.flags(applyCmd)

	var outDir string
	exportCmd := &cobra.Command{
		Use:   "export [-o DIR]",
		Short: "write the tenant's resources as apply documents",
		Long: `Writes every endpoint (never its secret), calendar, task and workflow of the
tenant as apply documents: to stdout, or with -o one file per resource
(DIR/tasks/NAME.yaml, …). Fields holding the API's default are left out;
applying an export to the same tenant changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			api, err := cc.client()
			if err != nil {
				return err
			}
			docs, err := apply.Export(c.Context(), api)
			if err != nil {
				return problem(err)
			}
			if outDir == "" {
				b, err := apply.Encode(docs)
				if err != nil {
					return err
				}
				_, err = stdout.Write(b)
				return err
			}
			paths, err := apply.WriteDir(outDir, docs)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "export: %d files in %s\n", len(paths), outDir)
			return nil
		},
	}
	exportCmd.Flags().StringVarP(&outDir, "output", "o", "", "a directory for one file per resource (default: stdout)")
	cc.flags(exportCmd)

	root.AddCommand(applyCmd, exportCmd, tasksCmd(cc, stdout), executionsCmd(cc, stdout), workflowsCmd(cc, stdout))
}

// problem is the API's problem detail without the client's prefix.
func problem(err error) error {
	var pe *client.ProblemError
	if errors.As(err, &pe) {
		return errors.New(strings.TrimPrefix(pe.Error(), "ax: "))
	}
	return err
}

// send is an answer's body, or its problem.
func send(body []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, problem(err)
	}
	return body, nil
}

// output is -o: json (the API's JSON) or table.
type output struct{ format string }

func (o *output) flag(c *cobra.Command) {
	c.PersistentFlags().StringVarP(&o.format, "output", "o", "table", "table or json (the API's JSON)")
}

func (o *output) check() error {
	if o.format != "table" && o.format != "json" {
		return fmt.Errorf("-o %q: give table or json", o.format)
	}
	return nil
}

// print writes the API's JSON, or a table of columns of each item (a
// list's items, or the one resource).
func (o *output) print(w io.Writer, body []byte, columns []string) error {
	if o.format == "json" {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	items := []any{v}
	if list, ok := v["items"].([]any); ok {
		items = list
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(columns, "\t")))
	for _, it := range items {
		m, _ := it.(map[string]any)
		cells := make([]string, len(columns))
		for i, c := range columns {
			cells[i] = cell(m, c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cell is a field for a table: a.b reaches into an object.
func cell(m map[string]any, path string) string {
	var v any = m
	for p := range strings.SplitSeq(path, ".") {
		obj, _ := v.(map[string]any)
		v = obj[p]
	}
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return x
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// taskID is the id of the task named (or with the id) ref.
func taskID(ctx context.Context, api *client.ClientWithResponses, ref string) (string, error) {
	if uuidRE.MatchString(ref) {
		return ref, nil
	}
	for t, err := range api.AllTasks(ctx, client.ListTasksParams{Name: &ref}) {
		if err != nil {
			return "", problem(err)
		}
		if t.Name == ref {
			return t.Id, nil
		}
	}
	return "", fmt.Errorf("no task named %q", ref)
}

// workflowID is the id of the workflow named (or with the id) ref.
func workflowID(ctx context.Context, api *client.ClientWithResponses, ref string) (string, error) {
	if uuidRE.MatchString(ref) {
		return ref, nil
	}
	var cursor *string
	for {
		r, err := api.ListWorkflowsWithResponse(ctx, &client.ListWorkflowsParams{Cursor: cursor})
		if err != nil {
			return "", err
		}
		if err := client.Check(r.HTTPResponse, r.Body); err != nil {
			return "", problem(err)
		}
		for _, w := range r.JSON200.Items {
			if w.Name == ref {
				return w.Id, nil
			}
		}
		if r.JSON200.NextCursor == nil || *r.JSON200.NextCursor == "" {
			return "", fmt.Errorf("no workflow named %q", ref)
		}
		cursor = r.JSON200.NextCursor
	}
}

var (
	taskColumns      = []string{"name", "state", "schedule.type", "schedule.cron", "next_run_at", "id"}
	executionColumns = []string{"id", "state", "trigger", "scheduled_for", "attempts", "last_status_code", "error_class"}
	workflowColumns  = []string{"name", "state", "version", "schedule.cron", "next_run_at", "id"}
	runColumns       = []string{"id", "state", "trigger", "scheduled_for"}
)

func tasksCmd(cc *clientConf, stdout io.Writer) *cobra.Command {
	o := &output{}
	cmd := &cobra.Command{Use: "tasks", Short: "list, get, pause, resume, trigger or delete tasks"}
	cc.flags(cmd)
	o.flag(cmd)
	var state, name string
	var labels []string
	list := &cobra.Command{
		Use: "list", Short: "list the tenant's tasks", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			api, err := clientFor(cc, o)
			if err != nil {
				return err
			}
			params := &client.ListTasksParams{}
			if state != "" {
				s := client.ListTasksParamsState(state)
				params.State = &s
			}
			if name != "" {
				params.Name = &name
			}
			if len(labels) > 0 {
				params.Label = &labels
			}
			limit := 500
			params.Limit = &limit
			r, err := api.ListTasksWithResponse(c.Context(), params)
			body, err := send(apply.Body(r, err))
			if err != nil {
				return err
			}
			return o.print(stdout, body, taskColumns)
		},
	}
	list.Flags().StringVar(&state, "state", "", "active, paused or completed")
	list.Flags().StringVar(&name, "name", "", "only names starting with this")
	list.Flags().StringArrayVar(&labels, "label", nil, "key=value (repeatable)")
	byName := func(use, short string, f func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error), done string) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME|ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				api, err := clientFor(cc, o)
				if err != nil {
					return err
				}
				id, err := taskID(c.Context(), api, args[0])
				if err != nil {
					return err
				}
				body, err := send(f(c.Context(), api, id))
				if err != nil {
					return err
				}
				if done != "" && o.format == "table" {
					var t struct{ Name string }
					if json.Unmarshal(body, &t) != nil || t.Name == "" {
						t.Name = args[0]
					}
					_, err := fmt.Fprintf(stdout, "task %s %s\n", t.Name, done)
					return err
				}
				if len(body) == 0 {
					return nil
				}
				cols := taskColumns
				if use == "trigger" {
					cols = executionColumns
				}
				return o.print(stdout, body, cols)
			},
		}
	}
	cmd.AddCommand(list,
		byName("get", "show a task", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.GetTaskWithResponse(ctx, id))
		}, ""),
		byName("pause", "pause a task", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.PauseTaskWithResponse(ctx, id))
		}, "paused"),
		byName("resume", "resume a paused task", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.ResumeTaskWithResponse(ctx, id))
		}, "resumed"),
		byName("trigger", "fire a task now (prints the execution)", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			key := client.NewIdempotencyKey()
			return apply.Body(api.TriggerTaskWithBodyWithResponse(ctx, id, &client.TriggerTaskParams{IdempotencyKey: &key}, "application/json", strings.NewReader("{}")))
		}, ""),
		byName("delete", "delete a task", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.DeleteTaskWithResponse(ctx, id))
		}, "deleted"),
	)
	return cmd
}

func executionsCmd(cc *clientConf, stdout io.Writer) *cobra.Command {
	o := &output{}
	cmd := &cobra.Command{Use: "executions", Short: "list, get, retry or cancel executions"}
	cc.flags(cmd)
	o.flag(cmd)
	var task, state string
	var limit int
	list := &cobra.Command{
		Use: "list [--task NAME] [--state STATE]", Short: "list executions, newest first", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			api, err := clientFor(cc, o)
			if err != nil {
				return err
			}
			params := &client.ListExecutionsParams{Limit: &limit}
			if task != "" {
				id, err := taskID(c.Context(), api, task)
				if err != nil {
					return err
				}
				params.TaskId = &id
			}
			if state != "" {
				s := client.ListExecutionsParamsState(state)
				params.State = &s
			}
			body, err := send(apply.Body(api.ListExecutionsWithResponse(c.Context(), params)))
			if err != nil {
				return err
			}
			return o.print(stdout, body, executionColumns)
		},
	}
	list.Flags().StringVar(&task, "task", "", "only this task's (a name or an id)")
	list.Flags().StringVar(&state, "state", "", "pending, running, succeeded, failed, cancelled, …")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many (up to 500)")
	byID := func(use, short string, f func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				api, err := clientFor(cc, o)
				if err != nil {
					return err
				}
				body, err := send(f(c.Context(), api, args[0]))
				if err != nil {
					return err
				}
				return o.print(stdout, body, executionColumns)
			},
		}
	}
	cmd.AddCommand(list,
		byID("get", "show an execution", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.GetExecutionWithResponse(ctx, id))
		}),
		byID("retry", "send a failed or cancelled execution again", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.RetryExecutionWithResponse(ctx, id))
		}),
		byID("cancel", "cancel an execution", func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.CancelExecutionWithResponse(ctx, id))
		}),
	)
	return cmd
}

func workflowsCmd(cc *clientConf, stdout io.Writer) *cobra.Command {
	o := &output{}
	cmd := &cobra.Command{Use: "workflows", Short: "list, get or trigger workflows"}
	cc.flags(cmd)
	o.flag(cmd)
	list := &cobra.Command{
		Use: "list", Short: "list the tenant's workflows", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			api, err := clientFor(cc, o)
			if err != nil {
				return err
			}
			limit := 500
			body, err := send(apply.Body(api.ListWorkflowsWithResponse(c.Context(), &client.ListWorkflowsParams{Limit: &limit})))
			if err != nil {
				return err
			}
			return o.print(stdout, body, workflowColumns)
		},
	}
	byName := func(use, short string, cols []string, f func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME|ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				api, err := clientFor(cc, o)
				if err != nil {
					return err
				}
				id, err := workflowID(c.Context(), api, args[0])
				if err != nil {
					return err
				}
				body, err := send(f(c.Context(), api, id))
				if err != nil {
					return err
				}
				return o.print(stdout, body, cols)
			},
		}
	}
	cmd.AddCommand(list,
		byName("get", "show a workflow", workflowColumns, func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			return apply.Body(api.GetWorkflowWithResponse(ctx, id))
		}),
		byName("trigger", "start a run now (prints the run)", runColumns, func(ctx context.Context, api *client.ClientWithResponses, id string) ([]byte, error) {
			key := client.NewIdempotencyKey()
			return apply.Body(api.TriggerWorkflowWithBodyWithResponse(ctx, id, &client.TriggerWorkflowParams{IdempotencyKey: &key}, "application/json", strings.NewReader("{}")))
		}),
	)
	return cmd
}

func clientFor(cc *clientConf, o *output) (*client.ClientWithResponses, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return cc.client()
}
