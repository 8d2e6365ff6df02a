package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// The incident page (/admin/search?trace=) at scale: every section reads
// an index keyed by trace id (job_traces for jobs, audit_events_trace_idx
// for events), so its latency must not grow with the jobs table.
func init() {
	register(Bench{Name: "page /admin/search?trace", Run: incidentBench})
}

func incidentBench(ctx context.Context, env *Env, _ string) (Result, error) {
	s, err := getScale(ctx, env)
	if err != nil {
		return Result{}, err
	}
	// Traces of jobs spread over the table (a sample, not the newest).
	rows, err := s.system.Query(ctx, `SELECT trace_id FROM job_traces TABLESAMPLE SYSTEM (1) LIMIT 100`)
	if err != nil {
		return Result{}, err
	}
	var traces []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return Result{}, err
		}
		traces = append(traces, t)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	if len(traces) == 0 {
		return Result{}, fmt.Errorf("no traces in the scale database's job_traces")
	}
	c := s.clients[s.srv.URL+" support@jejak.test"]
	i := 0
	return timeIt(env.Cfg.Requests, func() error {
		p := "/admin/search?trace=" + url.QueryEscape(traces[i%len(traces)])
		i++
		res, err := c.Get(s.srv.URL + p)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: status %d", p, res.StatusCode)
		}
		return err
	})
}
