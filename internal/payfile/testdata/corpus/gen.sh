#!/bin/sh
# gen.sh writes the workbook corpus of internal/payfile (TestCorpus) with
# LibreOffice Calc: each case is a flat ODS document written below (hidden
# rows, autofilters, number formats, formulas and sheets are plain XML
# there), converted by soffice to .xlsx, and some to .ods, .xls and locale
# CSVs, as finance's spreadsheets write them. The produced files are
# committed, so that the tests need no LibreOffice; run `make corpus` to
# write them again, then `go test ./internal/payfile -run TestCorpus -update`
# if the goldens change on purpose.
set -eu
cd "$(dirname "$0")"
dir=$(pwd)
SOFFICE=${SOFFICE:-soffice}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile="file://$work/profile"
convert() { # FILTER FILE...: convert the files into $work/out
	filter=$1
	shift
	"$SOFFICE" -env:UserInstallation="$profile" --headless --convert-to "$filter" --outdir "$work/out" "$@" >/dev/null 2>&1
}

doc_head() { # NAME opens a document whose first sheet is NAME
	cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
<office:automatic-styles>
<number:number-style style:name="N2"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:number-style>
<number:number-style style:name="Nfixed2"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1"/></number:number-style>
<number:number-style style:name="N0"><number:number number:decimal-places="0" number:min-decimal-places="0" number:min-integer-digits="1"/></number:number-style>
<number:number-style style:name="Npad"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="5"/></number:number-style>
<number:number-style style:name="Nthousands"><number:number number:decimal-places="0" number:min-decimal-places="0" number:min-integer-digits="1" number:grouping="true" number:display-factor="1000"/><number:text>K</number:text></number:number-style>
<number:number-style style:name="Nsci"><number:scientific-number number:decimal-places="2" number:min-integer-digits="1" number:min-exponent-digits="2"/></number:number-style>
<number:number-style style:name="Ncardsci"><number:scientific-number number:decimal-places="14" number:min-integer-digits="1" number:min-exponent-digits="3"/></number:number-style>
<number:number-style style:name="Nfrac"><number:fraction number:min-integer-digits="0" number:min-numerator-digits="1" number:min-denominator-digits="1"/></number:number-style>
<number:number-style style:name="Nde" number:language="de" number:country="DE"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:number-style>
<number:percentage-style style:name="Npct"><number:number number:decimal-places="0" number:min-decimal-places="0" number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>
<number:date-style style:name="Ndate"><number:day number:style="long"/><number:text>.</number:text><number:month number:style="long"/><number:text>.</number:text><number:year number:style="long"/></number:date-style>
<number:currency-style style:name="Nrub" number:language="ru" number:country="RU"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/><number:text> </number:text><number:currency-symbol number:language="ru" number:country="RU">руб.</number:currency-symbol></number:currency-style>
<number:currency-style style:name="Neur" number:language="de" number:country="DE"><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/><number:text> </number:text><number:currency-symbol number:language="de" number:country="DE">€</number:currency-symbol></number:currency-style>
<number:currency-style style:name="Nusd" number:language="en" number:country="US"><number:currency-symbol number:language="en" number:country="US">\$</number:currency-symbol><number:number number:decimal-places="2" number:min-decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:currency-style>
<style:style style:name="grouped" style:family="table-cell" style:data-style-name="N2"/>
<style:style style:name="fixed2" style:family="table-cell" style:data-style-name="Nfixed2"/>
<style:style style:name="whole" style:family="table-cell" style:data-style-name="N0"/>
<style:style style:name="padded" style:family="table-cell" style:data-style-name="Npad"/>
<style:style style:name="thousands" style:family="table-cell" style:data-style-name="Nthousands"/>
<style:style style:name="sci" style:family="table-cell" style:data-style-name="Nsci"/>
<style:style style:name="cardsci" style:family="table-cell" style:data-style-name="Ncardsci"/>
<style:style style:name="frac" style:family="table-cell" style:data-style-name="Nfrac"/>
<style:style style:name="de" style:family="table-cell" style:data-style-name="Nde"/>
<style:style style:name="pct" style:family="table-cell" style:data-style-name="Npct"/>
<style:style style:name="date" style:family="table-cell" style:data-style-name="Ndate"/>
<style:style style:name="rub" style:family="table-cell" style:data-style-name="Nrub"/>
<style:style style:name="eur" style:family="table-cell" style:data-style-name="Neur"/>
<style:style style:name="usd" style:family="table-cell" style:data-style-name="Nusd"/>
</office:automatic-styles>
<office:body><office:spreadsheet>
EOF
	sheet "$1"
}
sheet() { printf '<table:table table:name="%s">\n' "$1"; }
endsheet() { printf '</table:table>\n'; }
doc_tail() { printf '%s</office:spreadsheet></office:body></office:document>\n' "${1:-}"; }
col() { printf '<table:table-column%s/>\n' "${1:+ $1}"; }
# row [ATTRS] CELLS...: a row of the given cells.
row() { printf '<table:table-row%s>' "${ROW:+ $ROW}"; printf '%s' "$@"; printf '</table:table-row>\n'; }
s() { printf '<table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell>' "$1"; }
e() { printf '<table:table-cell/>'; }
# n VALUE [STYLE]: a number cell.
n() { printf '<table:table-cell%s office:value-type="float" office:value="%s"/>' "${2:+ table:style-name=\"$2\"}" "$1"; }
# f FORMULA VALUE TYPE [STYLE]: a formula and its result.
f() {
	if [ "$3" = string ]; then
		printf '<table:table-cell table:formula="of:%s" office:value-type="string" office:string-value="%s"><text:p>%s</text:p></table:table-cell>' "$1" "$2" "$2"
	else
		printf '<table:table-cell%s table:formula="of:%s" office:value-type="float" office:value="%s"/>' "${4:+ table:style-name=\"$4\"}" "$1" "$2"
	fi
}
hdr() { ROW= row "$(s externalId)" "$(s amount)" "$(s "$1")"; }

mkdir -p "$work/src" "$work/out"
cd "$work/src"

# Amounts as number cells under number formats: a currency, grouping,
# padding or a locale's separators pass; rounding, scaling, percent, a
# date, a fraction or an exponent are refused.
{
	doc_head Payouts
	hdr telecomOperator
	row "$(s PO-1)" "$(n 48000 rub)" "$(s MTS)"
	row "$(s PO-2)" "$(n 1500.5 eur)" "$(s MTS)"
	row "$(s PO-3)" "$(n 99.99 usd)" "$(s MTS)"
	row "$(s PO-4)" "$(n 250 fixed2)" "$(s MTS)"
	row "$(s PO-5)" "$(n 1234.5 grouped)" "$(s MTS)"
	row "$(s PO-6)" "$(n 12.3)" "$(s MTS)"
	row "$(s PO-7)" "$(n 12.5 padded)" "$(s MTS)"
	row "$(s PO-8)" "$(n 48000.25 de)" "$(s MTS)"
	row "$(s PO-9)" "$(n 1500.5 whole)" "$(s MTS)"
	row "$(s PO-10)" "$(n 0.5 pct)" "$(s MTS)"
	row "$(s PO-11)" "$(n 45306 date)" "$(s MTS)"
	row "$(s PO-12)" "$(n 48000 thousands)" "$(s MTS)"
	row "$(s PO-13)" "$(n 12.5 frac)" "$(s MTS)"
	row "$(s PO-14)" "$(n 48000 sci)" "$(s MTS)"
	row "$(s PO-15)" "$(n 0.125 fixed2)" "$(s MTS)"
	endsheet
	doc_tail
} >formatted-amounts.fods

# Amounts typed as text with decimal commas and space grouping (read with
# --amount-format comma).
{
	doc_head Payouts
	hdr telecomOperator
	row "$(s PO-1)" "$(s '1 500,50')" "$(s MTS)"
	row "$(s PO-2)" "$(s '48,00')" "$(s Beeline)"
	row "$(s PO-3)" "$(s '1500,5')" "$(s Tele2)"
	row "$(s PO-4)" "$(s '12.50')" "$(s MTS)"
	endsheet
	doc_tail
} >text-amounts-comma.fods

# Formulas with their saved results.
{
	doc_head Payouts
	hdr telecomOperator
	row "$(f '=&quot;PO-&quot;&amp;ROW()' PO-2 string)" "$(f '=ROUND(0.1+0.2;2)' 0.3 float fixed2)" "$(s MTS)"
	row "$(s PO-3)" "$(f '=0.1+0.2' 0.3 float fixed2)" "$(s MTS)"
	row "$(s PO-4)" "$(f '=[.B2]*100' 30 float grouped)" "$(s MTS)"
	row "$(s PO-5)" "$(f '=1/3' 0.333333333333333 float fixed2)" "$(s MTS)"
	endsheet
	doc_tail
} >formulas.fods

# Card numbers typed as numbers (a spreadsheet keeps 15 digits; Excel
# shows and exports a long one as 6.75964982643845E+018, as the format of
# the first does here), and one typed as text.
{
	doc_head Payouts
	hdr cardNumber
	row "$(s PO-1)" "$(n 10 fixed2)" "$(n 6759649826438453 cardsci)"
	row "$(s PO-2)" "$(n 20 fixed2)" "$(n 4111111111111111 whole)"
	row "$(s PO-3)" "$(n 30 fixed2)" "$(s 4111111111111111)"
	endsheet
	doc_tail
} >cards-as-numbers.fods

# A title row above the header and a total row below the payouts.
{
	doc_head Payouts
	ROW= row "$(s 'Payouts for March 2024')"
	ROW= row "$(e)"
	hdr telecomOperator
	row "$(s PO-1)" "$(n 100 grouped)" "$(s MTS)"
	row "$(s PO-2)" "$(n 200 grouped)" "$(s Beeline)"
	row "$(s Total)" "$(f '=SUM([.B4:.B5])' 300 float grouped)" "$(e)"
	endsheet
	doc_tail
} >title-total.fods

# The payouts on the second sheet.
{
	doc_head Summary
	row "$(s 'See the Payouts sheet')"
	row "$(s Total)" "$(n 300 grouped)"
	endsheet
	sheet Payouts
	hdr telecomOperator
	row "$(s PO-1)" "$(n 100 grouped)" "$(s MTS)"
	row "$(s PO-2)" "$(n 200 grouped)" "$(s Beeline)"
	endsheet
	doc_tail
} >second-sheet.fods

# Rows 5 and 8 hidden (48,000.00 and 100,000.00): the sheet shows 8 rows
# totalling 7,701.15 and holds 10 totalling 155,701.15.
{
	doc_head Payouts
	hdr telecomOperator
	row "$(s PO-1)" "$(n 1000 grouped)" "$(s MTS)"
	row "$(s PO-2)" "$(n 1500.5 grouped)" "$(s MTS)"
	row "$(s PO-3)" "$(n 700.65 grouped)" "$(s MTS)"
	ROW='table:visibility="collapse"' row "$(s PO-4)" "$(n 48000 grouped)" "$(s MTS)"
	row "$(s PO-5)" "$(n 1200 grouped)" "$(s MTS)"
	row "$(s PO-6)" "$(n 800 grouped)" "$(s MTS)"
	ROW='table:visibility="collapse"' row "$(s PO-7)" "$(n 100000 grouped)" "$(s MTS)"
	row "$(s PO-8)" "$(n 1000 grouped)" "$(s MTS)"
	row "$(s PO-9)" "$(n 1000 grouped)" "$(s MTS)"
	row "$(s PO-10)" "$(n 500 grouped)" "$(s MTS)"
	endsheet
	doc_tail
} >hidden-rows.fods

# The cardNumber column hidden.
{
	doc_head Payouts
	col 'table:number-columns-repeated="2"'
	col 'table:visibility="collapse"'
	hdr cardNumber
	row "$(s PO-1)" "$(n 10 fixed2)" "$(s 4111111111111111)"
	row "$(s PO-2)" "$(n 20 fixed2)" "$(s 5555555555554444)"
	endsheet
	doc_tail
} >hidden-column.fods

# An autofilter on the operator that shows only MTS: rows 3 and 5 are
# filtered out.
{
	doc_head Payouts
	hdr telecomOperator
	row "$(s PO-1)" "$(n 10 fixed2)" "$(s MTS)"
	ROW='table:visibility="filter"' row "$(s PO-2)" "$(n 20 fixed2)" "$(s Beeline)"
	row "$(s PO-3)" "$(n 30 fixed2)" "$(s MTS)"
	ROW='table:visibility="filter"' row "$(s PO-4)" "$(n 40 fixed2)" "$(s Tele2)"
	endsheet
	doc_tail '<table:database-ranges><table:database-range table:name="__Anonymous_Sheet_DB__0" table:target-range-address="Payouts.A1:Payouts.C5" table:display-filter-buttons="true"><table:filter><table:filter-condition table:field-number="2" table:value="MTS" table:operator="="/></table:filter></table:database-range></table:database-ranges>'
} >filtered-rows.fods

# A locale's sheet for the CSV exports: ids with accents, amounts shown
# with German separators.
{
	doc_head Zahlungen
	hdr telecomOperator
	row "$(s Café-1)" "$(n 1500.5 de)" "$(s MTS)"
	row "$(s Müller-2)" "$(n 48000 de)" "$(s Beeline)"
	row "$(s Señor-3)" "$(n 12.3 de)" "$(s Tele2)"
	endsheet
	doc_tail
} >locale.fods

convert xlsx ./*.fods
convert ods formatted-amounts.fods
convert 'xls:MS Excel 97' formatted-amounts.fods
# CSV filter options: separator, quote, charset (76 UTF-8, 1 Windows-1252),
# first line, cell formats, language, quote text, detect numbers, as shown.
convert 'csv:Text - txt - csv (StarCalc):59,34,76,1,,0,false,true,true' locale.fods
mv "$work/out/locale.csv" "$work/out/locale-semicolon.csv"
convert 'csv:Text - txt - csv (StarCalc):59,34,1,1,,0,false,true,true' locale.fods
mv "$work/out/locale.csv" "$work/out/locale-cp1252.csv"
convert 'csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true' cards-as-numbers.fods

cd "$work/out"
cp formatted-amounts.ods ods-renamed.xlsx
cp formatted-amounts.xls xls-renamed.xlsx
rm -f "$dir"/*.xlsx "$dir"/*.ods "$dir"/*.xls "$dir"/*.csv
cp ./* "$dir"/
