package server

import (
	"testing"

	"github.com/paygate/gateway/transport/operator"
)

// The admin API's routes meet the permission table here: reads of orders,
// deliveries and the audit log for every role, the export for finance,
// everything else for admins only, and any route not placed is admin-only.
func TestRouteActionHoldsEachRolesLimits(t *testing.T) {
	for _, tc := range []struct {
		write                   bool
		route                   string
		support, finance, admin bool
	}{
		{false, "orders", true, true, true},
		{false, "orders/mer_1/o1", true, true, true},
		{false, "orders.csv", false, true, true},
		{false, "audit", true, true, true},
		{false, "webhooks", true, true, true},
		{true, "webhooks/ntf_1/redeliver", true, true, true},
		{true, "reconcile", false, true, true},
		{true, "merchants", false, false, true},
		{true, "merchants/mer_1/rotate-keys", false, false, true},
		{true, "operators", false, false, true},
		{false, "operators", false, false, true},
		{true, "operators/a@b.co/disable", false, false, true},
		{false, "mids", false, false, true},
		{true, "mids", false, false, true},
		{false, "cluster", false, false, true},
		{true, "cluster/remove", false, false, true},
		{false, "vault", false, false, true},
		{true, "backup", false, false, true},
		{true, "orders", false, false, true}, // no such write: admin-only
		{false, "something-new", false, false, true},
	} {
		a := routeAction(tc.write, tc.route)
		for role, want := range map[operator.Role]bool{operator.Support: tc.support, operator.Finance: tc.finance, operator.Admin: tc.admin} {
			if got := role.Can(a); got != want {
				t.Errorf("write=%v %s: %s may = %v (action %s), want %v", tc.write, tc.route, role, got, a, want)
			}
		}
	}
}
