package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	ctx := context.Background()
	var sqls []string
	for _, f := range strings.Split(os.Args[1], ",") {
		b, _ := os.ReadFile(f)
		sqls = append(sqls, string(b))
	}
	mode := os.Args[2]
	n, _ := strconv.Atoi(os.Args[3])
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/jj_probe?sslmode=disable&jit=off")
	if err != nil {
		panic(err)
	}
	mt, _ := strconv.Atoi(os.Getenv("MT"))
	args := []any{nil, "default", "w1", 100, 60.0, int64(0), mt, 0, 0, true, []string{}}
	if len(os.Args) > 4 {
		args = args[:10]
	}
	if mode == "exec" {
		args = append([]any{pgx.QueryExecModeExec}, args...)
	}
	var pid int
	conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid)
	cpu := func() float64 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		var f [20]string
		fmt.Sscan(string(b), &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13], &f[14])
		u, _ := strconv.Atoi(f[13])
		s, _ := strconv.Atoi(f[14])
		return float64(u+s) * 10 // ms
	}
	cpus := make([]float64, len(sqls))
	walls := make([]time.Duration, len(sqls))
	got := 0
	for i := 0; i < n*len(sqls); i++ {
		k := (i / 5) % len(sqls)
		c0 := cpu()
		t0 := time.Now()
		rows, err := conn.Query(ctx, sqls[k], args...)
		if err != nil {
			panic(err)
		}
		for rows.Next() {
			got++
		}
		if rows.Err() != nil {
			panic(rows.Err())
		}
		walls[k] += time.Since(t0)
		cpus[k] += cpu() - c0
	}
	for k, f := range strings.Split(os.Args[1], ",") {
		fmt.Printf("%s %s: %.2f ms/claim wall, %.2f ms/claim backend cpu\n", f, mode, float64(walls[k].Microseconds())/1000/float64(n), cpus[k]/float64(n))
	}
	_ = got
}
