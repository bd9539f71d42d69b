package operator

import "testing"

func TestRolesLimits(t *testing.T) {
	for _, tc := range []struct {
		role Role
		a    Action
		want bool
	}{
		{Support, SearchOrders, true}, {Support, ResendWebhook, true}, {Support, MoveMoney, false},
		{Support, ExportCSV, false}, {Finance, ExportCSV, true}, {Finance, Reconcile, true},
		{Finance, MoveMoney, false}, {Finance, ManageOperators, false}, {Admin, MoveMoney, true},
		{Admin, ManageOperators, true}, {Role("root"), SearchOrders, false},
	} {
		if got := tc.role.Can(tc.a); got != tc.want {
			t.Errorf("%s.Can(%s) = %v, want %v", tc.role, tc.a, got, tc.want)
		}
	}
}
