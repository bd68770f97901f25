//! AWS's SigV4 test suite, vector by vector (the source is named in `tests/mod.rs`).

use super::*;

#[test]
fn suite_get_vanilla() {
    vanilla(
        "/",
        "/",
        "",
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    );
}

#[test]
fn suite_get_vanilla_query_order_key() {
    vanilla(
        "/?Param1=value2&Param1=Value1",
        "/",
        "Param1=Value1&Param1=value2",
        "704b4cef673542d84cdff252633f065e8daeba5f168b77116f8b1bcaf3d38f89",
        "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1",
    );
}

#[test]
fn suite_get_vanilla_query_order_key_case() {
    vanilla(
        "/?Param2=value2&Param1=value1",
        "/",
        "Param1=value1&Param2=value2",
        "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    );
}

#[test]
fn suite_get_vanilla_query_order_value() {
    vanilla(
        "/?Param1=value2&Param1=value1",
        "/",
        "Param1=value1&Param1=value2",
        "c968629d70850097a2d8781c9bf7edcb988b04cac14cca9be4acc3595f884606",
        "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694",
    );
}

#[test]
fn suite_get_vanilla_query_order_encoded() {
    vanilla(
        "/?Param-3=Value3&Param=Value2&%E1%88%B4=Value1",
        "/",
        "%E1%88%B4=Value1&Param=Value2&Param-3=Value3",
        "868294f5c38bd141c4972a373a76654f1418a8e4fc18b2e7903ae45e8ae0ec71",
        "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
    );
}

#[test]
fn suite_get_vanilla_query_unreserved() {
    let u = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    vanilla(
        &format!("/?{u}={u}"),
        "/",
        &format!("{u}={u}"),
        "c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
        "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
    );
}

#[test]
fn suite_get_vanilla_utf8_query() {
    vanilla(
        "/?\u{1234}=bar",
        "/",
        "%E1%88%B4=bar",
        "eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
        "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
    );
}

#[test]
fn suite_get_unreserved() {
    let u = "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    vanilla(u, u, "", "6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f");
}

#[test]
fn suite_get_utf8() {
    vanilla(
        "/\u{1234}",
        "/%E1%88%B4",
        "",
        "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
        "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
    );
}

#[test]
fn suite_get_space() {
    vanilla(
        "/example space/",
        "/example%20space/",
        "",
        "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
        "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
    );
}

const ROOT_STS: &str = "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63";
const ROOT_SIG: &str = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";

#[test]
fn suite_normalize_get_slash() {
    vanilla("//", "/", "", ROOT_STS, ROOT_SIG);
}

#[test]
fn suite_normalize_get_slashes() {
    vanilla(
        "//example//",
        "/example/",
        "",
        "cb96b4ac96d501f7c5c15bc6d67b3035061cfced4af6585ad927f7e6c985c015",
        "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84",
    );
}

#[test]
fn suite_normalize_get_relative() {
    vanilla("/example/..", "/", "", ROOT_STS, ROOT_SIG);
}

#[test]
fn suite_normalize_get_relative_relative() {
    vanilla("/example1/example2/../..", "/", "", ROOT_STS, ROOT_SIG);
}

#[test]
fn suite_normalize_get_slash_dot_slash() {
    vanilla("/./", "/", "", ROOT_STS, ROOT_SIG);
}

#[test]
fn suite_normalize_get_slash_pointless_dot() {
    vanilla(
        "/./example",
        "/example",
        "",
        "214d50c111a8edc4819da6a636336472c916b5240f51e9a51b5c3305180cf702",
        "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5",
    );
}

#[test]
fn suite_post_x_www_form_urlencoded() {
    suite(
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"Param1=value1",
        None,
        [
            "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
            &authz("content-type;host;x-amz-date", "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
        ],
    );
}

#[test]
fn suite_post_header_key_sort() {
    suite(
        "POST",
        "/",
        &[("Host", HOST), ("My-Header1", "value1")],
        b"",
        None,
        [
            &format!("POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n{EMPTY_SHA}"),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
            &authz("host;my-header1;x-amz-date", "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
        ],
    );
}

#[test]
fn suite_get_header_value_trim() {
    suite(
        "GET",
        "/",
        &[("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")],
        b"",
        None,
        [
            &format!(
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n{EMPTY_SHA}"
            ),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\na726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
            &authz("host;my-header1;my-header2;x-amz-date", "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        ],
    );
}

#[test]
fn suite_get_header_key_duplicate() {
    suite(
        "GET",
        "/",
        &[("My-Header1", "value2"), ("My-Header1", "value2"), ("My-Header1", "value1")],
        b"",
        None,
        [
            &format!(
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n{EMPTY_SHA}"
            ),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\ndc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
            &authz("host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"),
        ],
    );
}

#[test]
fn suite_get_header_value_multiline() {
    suite(
        "GET",
        "/",
        &[("My-Header1", "value1\n  value2\n     value3")],
        b"",
        None,
        [
            &format!(
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1 value2 value3\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n{EMPTY_SHA}"
            ),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\ne99419459a677bc11de234014be3c4e72c1ea5b454ceb58b613061f5d7a162e8",
            &authz("host;my-header1;x-amz-date", "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd"),
        ],
    );
}

/// post-sts-token/post-sts-header-before: the session token is added AND signed.
#[test]
fn suite_post_sts_token_header_before() {
    suite(
        "POST",
        "/",
        &[],
        b"",
        Some(STS_TOKEN),
        [
            &format!(
                "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:{STS_TOKEN}\n\nhost;x-amz-date;x-amz-security-token\n{EMPTY_SHA}"
            ),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\nc237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
            &authz("host;x-amz-date;x-amz-security-token", "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"),
        ],
    );
}

/// aws-c-auth tests/aws-signing-test-suite/v4/get-vanilla-with-session-token
/// (header-*.txt), commit 495329c2433034bd8fd53fc6ba9e0202d3fac876.
#[test]
fn suite_get_vanilla_with_session_token() {
    let t = "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";
    suite(
        "GET",
        "/",
        &[],
        b"",
        Some(t),
        [
            &format!(
                "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:{t}\n\nhost;x-amz-date;x-amz-security-token\n{EMPTY_SHA}"
            ),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
            &authz("host;x-amz-date;x-amz-security-token", "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
        ],
    );
}

#[test]
fn session_token_header_is_added_after_x_amz_date() {
    let url = Url::parse("https://example.amazonaws.com/").unwrap();
    let req = Request { method: "GET", url: &url, headers: &[], payload: Payload::Hash(b"") };
    let s = sign(&req, &creds(Some("tok")), &suite_scope(), suite_time()).unwrap();
    let names: Vec<&str> = s.headers().map(|(n, _)| n).collect();
    assert_eq!(names, ["x-amz-date", "x-amz-security-token", "authorization"]);
}
