// Package operator is the back office's people: operators, their roles and
// what each role may do (contract 13), and the sessions the dashboard signs
// them in with. The permission table here is the one place a role's limits
// are decided; the admin API and the dashboard both ask Can, so a role's
// limits hold on the server whatever a page shows.
package operator

import (
	"errors"
	"time"
)

// Role is an operator's role (contract 13).
type Role string

const (
	// Support searches and views orders and resends notifications.
	Support Role = "support"
	// Finance is support plus the CSV export and reconciliation.
	Finance Role = "finance"
	// Admin may do everything: move money from the back office, manage
	// merchants and their keys, MIDs, operators and the cluster.
	Admin Role = "admin"
)

// Roles lists every role, least powerful first.
var Roles = []Role{Support, Finance, Admin}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r == Support || r == Finance || r == Admin }

// Action is something an operator asks the back office to do.
type Action string

const (
	SearchOrders    Action = "search_orders"    // orders list, one order, audit log reading
	ResendWebhook   Action = "resend_webhook"   // resend a notification
	ExportCSV       Action = "export_csv"       // orders.csv
	Reconcile       Action = "reconcile"        // acquirer reconciliation
	MoveMoney       Action = "move_money"       // settle, void, refund from the back office
	ManageMerchants Action = "manage_merchants" // create merchants, rotate and see their keys' public halves
	ManageMIDs      Action = "manage_mids"      // register processing MIDs
	ManageOperators Action = "manage_operators" // add, list, disable operators
	ManageCluster   Action = "manage_cluster"   // join tokens, members, backups, vault
)

// allowed is the permission table: each role's actions beyond the role
// below it.
var allowed = map[Role][]Action{
	Support: {SearchOrders, ResendWebhook},
	Finance: {SearchOrders, ResendWebhook, ExportCSV, Reconcile},
	Admin:   {SearchOrders, ResendWebhook, ExportCSV, Reconcile, MoveMoney, ManageMerchants, ManageMIDs, ManageOperators, ManageCluster},
}

// Can reports whether role r may perform a. An unknown role may do nothing.
func (r Role) Can(a Action) bool {
	for _, x := range allowed[r] {
		if x == a {
			return true
		}
	}
	return false
}

// Session is a signed-in operator as the dashboard sees it.
type Session struct {
	Email string
	Role  Role
	// CSRF is the token every form of this session must carry; it is
	// derived from the session's secret, so it is never stored.
	CSRF    string
	Expires time.Time
	// IdleExpires is when the session ends unless it is used before (each
	// use renews it, at most about once a minute); zero for a session
	// started before idle timeouts existed, which has only Expires.
	IdleExpires time.Time
}

// Errors SignIn answers. Neither says which of email or password was wrong.
var (
	ErrBadCredentials = errors.New("operator: email or password wrong, or operator disabled")
	ErrRateLimited    = errors.New("operator: too many sign-in attempts; wait and try again")
)

// Authenticator signs operators in and finds their sessions. Sessions are
// replicated records (only a hash of the token is kept), so a session
// survives a leader change and any node can check it.
type Authenticator interface {
	// SignIn checks the password (argon2id), rate-limits attempts per
	// email and per source IP, audits the attempt whatever its outcome,
	// and answers the new session's opaque token (for the cookie).
	SignIn(email, password, sourceIP string, now time.Time) (token string, s Session, err error)
	// Session finds the live session of a token (false: unknown, expired,
	// idle past its deadline, signed out or its operator disabled), and
	// renews its idle deadline: a call is the session's use.
	Session(token string, now time.Time) (Session, bool)
	// SignOut ends the session of token.
	SignOut(token string) error
}
