package labsim

// pkgInfo is a package the simulated apt can install. A package with a Unit
// brings a systemd service with it, started and enabled as Debian does.
type pkgInfo struct {
	Version     string
	Arch        string // "all" or "amd64"
	SizeKB      int
	Deps        []string
	Unit        string
	Port        int
	Description string
}

// packages is what the simulated mirror carries. docker-compose-plugin is
// missing on purpose: Debian does not ship it, and agents keep asking for it.
var packages = map[string]pkgInfo{
	"nginx":                    {Version: "1.22.1-9+deb12u1", SizeKB: 527, Deps: []string{"nginx-common"}, Unit: "nginx.service", Port: 80, Description: "A high performance web server and a reverse proxy server"},
	"nginx-common":             {Version: "1.22.1-9+deb12u1", Arch: "all", SizeKB: 112},
	"apache2":                  {Version: "2.4.62-1~deb12u2", SizeKB: 221, Deps: []string{"apache2-bin", "apache2-data", "apache2-utils"}, Unit: "apache2.service", Port: 80, Description: "The Apache HTTP Server"},
	"apache2-bin":              {Version: "2.4.62-1~deb12u2", SizeKB: 1379},
	"apache2-data":             {Version: "2.4.62-1~deb12u2", Arch: "all", SizeKB: 160},
	"apache2-utils":            {Version: "2.4.62-1~deb12u2", SizeKB: 209},
	"caddy":                    {Version: "2.6.2-5", SizeKB: 11235, Unit: "caddy.service", Port: 80, Description: "Caddy"},
	"jellyfin":                 {Version: "10.10.3+deb12", Arch: "all", SizeKB: 3200, Deps: []string{"jellyfin-server", "jellyfin-web", "jellyfin-ffmpeg7"}, Unit: "jellyfin.service", Port: 8096, Description: "Jellyfin Media Server"},
	"jellyfin-server":          {Version: "10.10.3+deb12", SizeKB: 58120},
	"jellyfin-web":             {Version: "10.10.3+deb12", Arch: "all", SizeKB: 19840},
	"jellyfin-ffmpeg7":         {Version: "7.0.2-8-bookworm", SizeKB: 41200},
	"redis-server":             {Version: "5:7.0.15-1~deb12u1", SizeKB: 72, Deps: []string{"redis-tools"}, Unit: "redis-server.service", Port: 6379, Description: "Advanced key-value store"},
	"redis-tools":              {Version: "5:7.0.15-1~deb12u1", SizeKB: 1001},
	"postgresql":               {Version: "15+248", Arch: "all", SizeKB: 11, Deps: []string{"postgresql-15", "postgresql-common"}, Unit: "postgresql.service", Port: 5432, Description: "PostgreSQL RDBMS"},
	"postgresql-15":            {Version: "15.10-0+deb12u1", SizeKB: 16988},
	"postgresql-common":        {Version: "248", Arch: "all", SizeKB: 163},
	"mariadb-server":           {Version: "1:10.11.6-0+deb12u1", SizeKB: 3887, Deps: []string{"mariadb-client", "mariadb-common"}, Unit: "mariadb.service", Port: 3306, Description: "MariaDB 10.11.6 database server"},
	"mariadb-client":           {Version: "1:10.11.6-0+deb12u1", SizeKB: 2995},
	"mariadb-common":           {Version: "1:10.11.6-0+deb12u1", Arch: "all", SizeKB: 27},
	"docker.io":                {Version: "20.10.24+dfsg1-1+deb12u1", SizeKB: 27640, Deps: []string{"containerd", "runc"}, Unit: "docker.service", Description: "Docker Application Container Engine"},
	"containerd":               {Version: "1.6.20~ds1-1+b1", SizeKB: 23540},
	"runc":                     {Version: "1.1.5+ds1-1+deb12u1", SizeKB: 2653},
	"openssh-server":           {Version: "1:9.2p1-2+deb12u3", SizeKB: 456, Unit: "ssh.service", Port: 22, Description: "OpenBSD Secure Shell server"},
	"cron":                     {Version: "3.0pl1-162", SizeKB: 98, Unit: "cron.service", Description: "Regular background program processing daemon"},
	"postfix":                  {Version: "3.7.11-0+deb12u1", SizeKB: 1541, Unit: "postfix.service", Port: 25, Description: "Postfix Mail Transport Agent"},
	"prometheus":               {Version: "2.42.0+ds-5+b5", SizeKB: 25710, Unit: "prometheus.service", Port: 9090, Description: "Monitoring system and time series database"},
	"prometheus-node-exporter": {Version: "1.5.0-1+b6", SizeKB: 3994, Unit: "prometheus-node-exporter.service", Port: 9100, Description: "Prometheus exporter for machine metrics"},
	"mosquitto":                {Version: "2.0.11-1.2+deb12u1", SizeKB: 183, Unit: "mosquitto.service", Port: 1883, Description: "Mosquitto MQTT Broker"},
	"unbound":                  {Version: "1.17.1-2+deb12u2", SizeKB: 946, Unit: "unbound.service", Port: 53, Description: "Unbound DNS server"},
	"samba":                    {Version: "2:4.17.12+dfsg-0+deb12u1", SizeKB: 1180, Unit: "smbd.service", Port: 445, Description: "Samba SMB Daemon"},
	"nfs-kernel-server":        {Version: "1:2.6.2-4+deb12u1", SizeKB: 155, Unit: "nfs-server.service", Port: 2049, Description: "NFS server and services"},
	"fail2ban":                 {Version: "1.0.2-2", Arch: "all", SizeKB: 451, Unit: "fail2ban.service", Description: "Fail2Ban Service"},
	"curl":                     {Version: "7.88.1-10+deb12u8", SizeKB: 315},
	"libc6":                    {Version: "2.36-9+deb12u8", SizeKB: 2757, Description: "GNU C Library: Shared libraries"},
	"libc-bin":                 {Version: "2.36-9+deb12u8", SizeKB: 609, Description: "GNU C Library: Binaries"},
	"wget":                     {Version: "1.21.3-1+b2", SizeKB: 984},
	"git":                      {Version: "1:2.39.5-0+deb12u1", SizeKB: 7260},
	"ca-certificates":          {Version: "20230311", Arch: "all", SizeKB: 153},
	"gnupg":                    {Version: "2.2.40-1.1", Arch: "all", SizeKB: 846},
	"gpg":                      {Version: "2.2.40-1.1", SizeKB: 949},
	"htop":                     {Version: "3.2.2-2", SizeKB: 152},
	"vim":                      {Version: "2:9.0.1378-2", SizeKB: 1567},
	"nano":                     {Version: "7.2-1+deb12u1", SizeKB: 690},
	"sudo":                     {Version: "1.9.13p3-1+deb12u1", SizeKB: 1889},
	"jq":                       {Version: "1.6-2.1", SizeKB: 65},
	"unzip":                    {Version: "6.0-28", SizeKB: 166},
	"zip":                      {Version: "3.0-13", SizeKB: 230},
	"python3":                  {Version: "3.11.2-1+b1", SizeKB: 26},
	"python3-pip":              {Version: "23.0.1+dfsg-1", Arch: "all", SizeKB: 1325},
	"rsync":                    {Version: "3.2.7-1+deb12u2", SizeKB: 417},
	"tmux":                     {Version: "3.3a-3", SizeKB: 455},
	"dnsutils":                 {Version: "1:9.18.33-1~deb12u2", Arch: "all", SizeKB: 12},
	"iputils-ping":             {Version: "3:20221126-1+deb12u1", SizeKB: 47},
	"net-tools":                {Version: "2.10-0.1", SizeKB: 243},
	"lsb-release":              {Version: "12.0-1", Arch: "all", SizeKB: 6},
	"apt-transport-https":      {Version: "2.6.1", Arch: "all", SizeKB: 25},
	"build-essential":          {Version: "12.9", SizeKB: 8},
	"ffmpeg":                   {Version: "7:5.1.6-0+deb12u1", SizeKB: 1827},
	"sqlite3":                  {Version: "3.40.1-2+deb12u1", SizeKB: 350},
	"wireguard-tools":          {Version: "1.0.20210914-1+b1", SizeKB: 87},
}

// basePackages come with every template; the interesting ones carry units.
var basePackages = []string{"libc6", "libc-bin", "openssh-server", "cron", "postfix", "ca-certificates", "curl", "iputils-ping"}

type ctTemplate struct {
	distro    string // debian or ubuntu: picks the mirror
	codename  string
	osRelease string
	sizeMB    int
}

const defaultTemplate = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"

// templates are the container templates stored on every simulated node.
var templates = map[string]ctTemplate{
	defaultTemplate: {
		distro:   "debian",
		codename: "bookworm",
		sizeMB:   120,
		osRelease: `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
`,
	},
	"local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst": {
		distro:   "ubuntu",
		codename: "noble",
		sizeMB:   141,
		osRelease: `PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo
`,
	},
}

// mirror is the host apt fetches from, so DNS failures name the right one.
func (t ctTemplate) mirror() (host, url string) {
	if t.distro == "ubuntu" {
		return "archive.ubuntu.com", "http://archive.ubuntu.com/ubuntu"
	}
	return "deb.debian.org", "http://deb.debian.org/debian"
}

const hostOSRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
`

const (
	pveVersion    = "pve-manager/8.2.7/3e0176e6bb2ade3b (running kernel: 6.8.12-2-pve)"
	kernelRelease = "6.8.12-2-pve"
)

// publicResolvers answer from anywhere that has a network.
var publicResolvers = map[string]bool{
	"1.1.1.1": true, "1.0.0.1": true,
	"8.8.8.8": true, "8.8.4.4": true,
	"9.9.9.9": true, "149.112.112.112": true,
}
