package calendar

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/errs"
)

func TestCalendarValidation(t *testing.T) {
	t.Parallel()
	in, err := Input{Name: " holidays ", Dates: []string{"2027-01-02", "2027-01-01", "2027-01-02"}}.validate()
	require.NoError(t, err)
	require.Equal(t, "holidays", in.Name)
	require.Equal(t, "UTC", in.Timezone)
	require.Equal(t, []string{"2027-01-01", "2027-01-02"}, in.Dates)

	_, err = Input{Name: "", Timezone: "Mars/Base", Dates: []string{"2027-02-30", "2027-1-1", "tomorrow"}}.validate()
	var ve *errs.ValidationError
	require.ErrorAs(t, err, &ve)
	fields := map[string]string{}
	for _, f := range ve.Fields {
		fields[f.Field] = f.Message
	}
	require.Contains(t, fields, "name")
	require.Equal(t, `unknown time zone "Mars/Base"`, fields["timezone"])
	require.Contains(t, fields["dates[0]"], "YYYY-MM-DD")
	require.Contains(t, fields, "dates[1]")
	require.Contains(t, fields, "dates[2]")
}
