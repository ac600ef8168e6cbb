package leases

import (
	"context"
	"reflect"
	"testing"
)

// TestWithCharge_OuterOperationClassifies: a request reports under the kind and lease of the
// outermost operation (a renew's re-read is the renew's), under "other" without one, and not
// at all without a recorder.
func TestWithCharge_OuterOperationClassifies(t *testing.T) {
	t.Parallel()
	type rec struct {
		kind  ChargeKind
		lease string
		ru    float64
	}
	var got []rec
	ctx := WithChargeRecorder(context.Background(), func(k ChargeKind, l string, ru float64) { got = append(got, rec{k, l, ru}) })
	ReportCharge(ctx, 1)
	renew := WithCharge(ctx, ChargeRenew, "3")
	ReportCharge(WithCharge(renew, ChargeLeaseRead, "3"), 1.04)
	ReportCharge(renew, 10.68)
	ReportCharge(WithCharge(context.Background(), ChargeRenew, "3"), 99) // no recorder
	want := []rec{{ChargeOther, "", 1}, {ChargeRenew, "3", 1.04}, {ChargeRenew, "3", 10.68}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports = %v, want %v", got, want)
	}
}
