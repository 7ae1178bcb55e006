# Sourced by zookeeper-server and zookeeper-shell: $ZOO_CLASSPATH, Debian's ZooKeeper jars and
# the libraries the server and its client need (slf4j-simple: logging to stderr).
j=/usr/share/java
ZOO_CLASSPATH="$j/zookeeper.jar:$j/zookeeper-jute.jar:$j/slf4j-api.jar:$j/slf4j-simple.jar"
for jar in netty-buffer netty-codec netty-common netty-handler netty-resolver netty-transport \
           netty-transport-native-epoll netty-transport-native-unix-common commons-cli metrics-core \
           snappy-java; do
  ZOO_CLASSPATH="$ZOO_CLASSPATH:$j/$jar.jar"
done
