package main

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An account owns at most SVC_MAX_PROJECTS_PER_ACCOUNT projects: creates past it are
// refused with 403 project_limit_reached naming the limit, also when they race (one
// account's concurrent creates at limit-1 let exactly one through), other accounts are
// unaffected, and `accounts set-limit --projects` raises one account's limit at once.
func TestProjectLimitPerAccount(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		env := map[string]string{"SVC_MAX_PROJECTS_PER_ACCOUNT": "3"}
		for k, v := range db {
			env[k] = v
		}
		s := startStack(t, env)
		cp := s.cp.URL
		tok, _ := s.signup(t, "busy@example.com")
		other, _ := s.signup(t, "other@example.com")
		create := func(tok, name string) reply {
			return call(t, cp, "POST", "/api/v1/projects", tok, map[string]string{"name": name})
		}
		for i := range 2 {
			r := create(tok, "p"+strconv.Itoa(i))
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		}

		// Six creates at once, one place left: one gets it.
		var wg sync.WaitGroup
		replies := make([]reply, 6)
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i] = create(tok, "race"+strconv.Itoa(i))
			}()
		}
		wg.Wait()
		created := 0
		for _, r := range replies {
			switch r.Status {
			case http.StatusCreated:
				created++
			case http.StatusForbidden:
				assertProjectLimit(t, r, 3)
			default:
				t.Errorf("a racing create answered %d: %s", r.Status, r.Raw)
			}
		}
		assert.Equal(t, 1, created, "racing creates at limit-1 that succeeded")
		list := call(t, cp, "GET", "/api/v1/projects", tok, nil)
		assert.Len(t, list.Body["projects"], 3)
		assertProjectLimit(t, create(tok, "one more"), 3)

		assert.Equal(t, http.StatusCreated, create(other, "theirs").Status, "another account is not limited by this one's projects")

		out, code := accountsCLI(t, s, "set-limit", "busy@example.com", "--projects", "5")
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "busy@example.com: project limit 5 (was default (3)); it owns 3")
		for i := range 2 {
			r := create(tok, "raised"+strconv.Itoa(i))
			require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		}
		assertProjectLimit(t, create(tok, "sixth"), 5)

		// Deleting one makes room again.
		id := list.Body["projects"].([]any)[0].(map[string]any)["id"].(string)
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/projects/"+id, tok, nil).Status)
		assert.Equal(t, http.StatusCreated, create(tok, "after delete").Status)
	})
}

func assertProjectLimit(t *testing.T, r reply, limit int) {
	t.Helper()
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
	assert.Equal(t, "project_limit_reached", r.code())
	assert.Contains(t, r.message(), "limit of "+strconv.Itoa(limit)+" projects")
	assert.EqualValues(t, limit, r.Body["error"].(map[string]any)["limit"])
}
