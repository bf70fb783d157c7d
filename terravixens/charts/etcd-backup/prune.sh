# terravixens etcd backup retention (ADR 0059): keep the newest $KEEP objects named $PREFIX*.snap.age, delete the
# older ones. Runs only after a new backup was uploaded (the backup is this Job's init container).
set -eu
printf '[default]\ns3 =\n  addressing_style = path\n' > /tmp/aws-config
export AWS_CONFIG_FILE=/tmp/aws-config
keys=$(aws s3api list-objects-v2 --endpoint-url "$ENDPOINT" --bucket "$BUCKET" --prefix "$PREFIX" \
  --query 'sort_by(Contents[?ends_with(Key, `.snap.age`)] || `[]`, &LastModified)[].Key' --output text)
set -f
set -- $keys
set +f
[ "${1:-None}" = None ] && set --
excess=$(( $# - KEEP ))
echo "etcd backups under s3://$BUCKET/$PREFIX*: $# found, the newest $KEEP kept"
while [ "$excess" -gt 0 ]; do
  aws s3api delete-object --endpoint-url "$ENDPOINT" --bucket "$BUCKET" --key "$1" > /dev/null
  echo "deleted s3://$BUCKET/$1"
  shift
  excess=$(( excess - 1 ))
done
