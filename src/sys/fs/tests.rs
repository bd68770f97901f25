use super::*;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::time::Instant;

/// growth leaves the bytes read so far in freed memory, not zeroed).
#[test]
fn a_read_buffer_is_sized_from_the_file_and_never_grows() {
    let d = dir("cap");
    for n in [0usize, 1, 31, 32, 33, 4096, 65_537] {
        let p = d.path().join(format!("f{n}"));
        std::fs::write(&p, vec![b's'; n]).unwrap();
        let bytes = read_capped(&File::open(&p).unwrap(), 1 << 20).unwrap();
        assert_eq!((bytes.len(), bytes.capacity()), (n, n + 1), "{n} bytes");
    }
    let p = d.path().join("big");
    std::fs::write(&p, vec![b's'; 100]).unwrap();
    assert!(matches!(read_capped(&File::open(&p).unwrap(), 99), Err(SysError::TooLarge { max: 99 })));
}

fn dir(tag: &str) -> tempfile::TempDir {
    // A private (0700) directory under the sticky /tmp, removed on drop.
    tempfile::Builder::new().prefix(&format!("sp-sys-{tag}-")).tempdir().unwrap()
}

fn file(d: &Path, name: &str, mode: u32) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, b"content\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn a_fifo_is_refused_at_once_without_a_writer() {
    let tmp = dir("fifo");
    let d = tmp.path().to_path_buf();
    let fifo = d.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    let started = Instant::now();
    assert_eq!(read(&fifo, Rules::any(100)).unwrap_err(), SysError::NotRegular { kind: "FIFO (named pipe)" });
    assert_eq!(read_within(&fifo, Rules::any(100), READ_TIMEOUT).unwrap_err(), SysError::NotRegular { kind: "FIFO (named pipe)" });
    assert!(started.elapsed() < Duration::from_secs(2));
    // The descriptor check refuses one too (a FIFO swapped in after the lstat).
    let fd = rustix::fs::open(&fifo, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty()).unwrap();
    assert_eq!(check(&fd, Rules::any(100)).unwrap_err(), SysError::NotRegular { kind: "FIFO (named pipe)" });
}

#[test]
fn devices_directories_and_symlinks_are_refused() {
    assert_eq!(read(Path::new("/dev/null"), Rules::any(100)).unwrap_err(), SysError::NotRegular { kind: "character device" });
    assert_eq!(read(Path::new("/"), Rules::any(100)).unwrap_err(), SysError::NotRegular { kind: "directory" });
    let tmp = dir("link");
    let d = tmp.path().to_path_buf();
    let target = file(&d, "target", 0o600);
    let link = d.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(read(&link, Rules::any(100)).unwrap_err(), SysError::Symlink);
    assert_eq!(&read(&link, Rules::any(100).following()).unwrap()[..], b"content\n");
    let fifo = d.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    let to_fifo = d.join("to-fifo");
    std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
    assert_eq!(read(&to_fifo, Rules::any(100).following()).unwrap_err(), SysError::NotRegular { kind: "FIFO (named pipe)" });
    assert_eq!(read(&d.join("absent"), Rules::any(100)).unwrap_err(), SysError::Missing);
    assert_eq!(&read(&target, Rules::any(100)).unwrap()[..], b"content\n");
}

#[test]
fn mode_owner_and_size_rules() {
    let tmp = dir("rules");
    let d = tmp.path().to_path_buf();
    let open = file(&d, "open", 0o640);
    assert_eq!(read(&open, Rules::owned(0o077, 100)).unwrap_err(), SysError::TooOpen { mode: 0o640, forbidden: 0o077 });
    assert!(read(&open, Rules::owned(0o022, 100)).is_ok());
    assert_eq!(read(&open, Rules::owned(0o022, 3)).unwrap_err(), SysError::TooLarge { max: 3 });
    let msg = SysError::TooOpen { mode: 0o664, forbidden: 0o022 }.to_string();
    assert!(msg.contains("0664") && msg.contains("group or others write"), "{msg}");
    // /proc/1/... is not ours; /etc/hostname is root's, which is allowed.
    assert!(read(Path::new("/etc/hostname"), Rules::owned(0o022, 1 << 20)).is_ok() || euid() != 0);
}

#[test]
fn a_read_that_never_returns_times_out_and_the_caller_goes_on() {
    // Stands in for open(2) or read(2) on a file system that does not answer.
    let (release, stuck) = std::sync::mpsc::channel::<()>();
    let started = Instant::now();
    let got = within(Duration::from_millis(200), move || {
        let _ = stuck.recv();
        Ok(())
    });
    assert_eq!(got, Err(SysError::TimedOut { after: Duration::from_millis(200) }));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(SysError::TimedOut { after: READ_TIMEOUT }.to_string().contains("within 5s"));
    drop(release);
}

/// A path read once from a local file system is read on the caller's thread after
/// that, with every check of the first read still applied to what is there now.
/// Attacks tried (held): the file swapped for a FIFO, a symbolic link to a device, a
/// file too open or too large, or removed, between two reads: each refused as on a
/// first read; a FIFO is never remembered as local.
#[test]
fn a_local_file_read_again_is_read_here_and_checked_again() {
    let tmp = dir("local");
    let d = tmp.path().to_path_buf();
    let rules = Rules::owned(0o077, 100).following();
    let p = file(&d, "secret", 0o600);
    // Where the test's temporary directory is not on a disk or in memory (an NFS
    // home), nothing is remembered and every read takes the helper thread.
    let local = local::is_local(&File::open(&p).unwrap());
    assert_eq!(&read_within(&p, rules, READ_TIMEOUT).unwrap()[..], b"content\n");
    assert_eq!(local::known(&p), local);
    assert_eq!(&read_within(&p, rules, READ_TIMEOUT).unwrap()[..], b"content\n");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(read_within(&p, rules, READ_TIMEOUT).unwrap_err(), SysError::TooOpen { mode: 0o644, forbidden: 0o077 });
    std::fs::write(&p, vec![b'x'; 101]).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(read_within(&p, rules, READ_TIMEOUT).unwrap_err(), SysError::TooLarge { max: 100 });
    std::fs::remove_file(&p).unwrap();
    assert_eq!(read_within(&p, rules, READ_TIMEOUT).unwrap_err(), SysError::Missing);
    rustix::fs::mknodat(rustix::fs::CWD, &p, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    let started = Instant::now();
    assert_eq!(read_within(&p, rules, READ_TIMEOUT).unwrap_err(), SysError::NotRegular { kind: "FIFO (named pipe)" });
    assert!(started.elapsed() < Duration::from_secs(2));
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    assert_eq!(read_within(&p, rules, READ_TIMEOUT).unwrap_err(), SysError::NotRegular { kind: "character device" });
    // A FIFO read first is never remembered.
    let fifo = d.join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    let _ = read_within(&fifo, rules, READ_TIMEOUT);
    assert!(!local::known(&fifo));
    // /proc is not a disk: a file there is never read on the caller's thread.
    assert!(!local::is_local(&File::open("/proc/self/status").unwrap()));
}

#[test]
fn program_rules() {
    let tmp = dir("prog");
    let d = tmp.path().to_path_buf();
    assert_eq!(check_program(&file(&d, "ok", 0o755)), Ok(()));
    assert_eq!(check_program(&file(&d, "open", 0o775)), Err(SysError::TooOpen { mode: 0o775, forbidden: 0o022 }));
    assert_eq!(check_program(&d), Err(SysError::NotRegular { kind: "directory" }));
    assert_eq!(check_program(&d.join("absent")), Err(SysError::Missing));
}

#[test]
fn append_create_makes_a_private_file() {
    let tmp = dir("append");
    let d = tmp.path().to_path_buf();
    let p = d.join("kh");
    let (_, info) = open(&p, Access::AppendCreate { mode: 0o600 }, Rules::owned(0o022, 100)).unwrap();
    assert_eq!(info.mode & 0o777, 0o600);
}

#[test]
fn strict_modes_for_directories() {
    let tmp = dir("dirs");
    let d = tmp.path().to_path_buf();
    let f = file(&d, "policy.json", 0o600);
    assert_eq!(check_dirs(&f), Ok(()), "a 0700 directory under sticky /tmp is fine");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(
        check_dirs(&f),
        Err(UnsafeDir { dir: d.clone(), why: SysError::TooOpen { mode: 0o1777, forbidden: 0o022 } }),
        "sticky or not, the holding directory must be private"
    );
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_eq!(check_dirs(&f), Err(UnsafeDir { dir: d.clone(), why: SysError::TooOpen { mode: 0o770, forbidden: 0o022 } }));
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sub = d.join("sub");
    std::fs::DirBuilder::new().mode(0o700).create(&sub).unwrap();
    let g = file(&sub, "policy.json", 0o600);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(check_dirs(&g).unwrap_err().dir, d, "a world-writable ancestor without the sticky bit");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(check_dirs(&g), Ok(()), "a sticky ancestor is like /tmp");
}

#[test]
fn errors_are_std_errors_and_an_unsafe_dir_names_its_cause() {
    fn is_error<E: std::error::Error>(_: &E) {}
    let bad = UnsafeDir { dir: PathBuf::from("/x"), why: SysError::TooOpen { mode: 0o777, forbidden: 0o022 } };
    is_error(&bad);
    assert_eq!(std::error::Error::source(&bad).map(|e| e.to_string()), Some(bad.why.to_string()));
    assert!(bad.to_string().starts_with("directory /x "), "{bad}");
}
